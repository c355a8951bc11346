"""vLLM bench serve result files -> ImportedRun: the load, acceptance, failed requests and one-line errors, on the
real files in tests/fixtures/imports/vllm/ (altered copies where a case needs another field)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakes.words import words
from speculab.errors import UserError
from speculab.harness.imports import vllm_bench
from speculab.harness.records import ErrorCategory, TokenCountSource

VLLM = Path(__file__).resolve().parents[3] / "fixtures" / "imports" / "vllm"
RAW = json.loads((VLLM / "baseline.json").read_text())


def _file(tmp_path: Path, **changes) -> Path:
    f = tmp_path / "run.json"
    f.write_text(json.dumps(RAW | changes))
    return f


def test_records_follow_the_files_per_request_fields() -> None:
    run = vllm_bench.read(VLLM / "baseline.json")
    assert [r.index for r in run.records] == list(range(40)) and run.acceptance is None
    for i in (0, 17, 39):
        r = run.records[i]
        assert r.scheduled_s == pytest.approx(RAW["start_times"][i] - RAW["queue_times"][i])
        assert len(r.chunks) == 1 + len(RAW["itls"][i]) and all(c.n_tokens is None for c in r.chunks)
        assert r.chunks[-1].t_s - r.sent_s == pytest.approx(RAW["ttfts"][i] + sum(RAW["itls"][i]))
        assert r.token_count_source is TokenCountSource.RESULT_FILE and r.ok
    assert run.input_lens == tuple(RAW["input_lens"]) and run.items == ()
    assert "vLLM 0.32.0" in words(run.notes)[0] and run.started_utc == RAW["date"]


@pytest.mark.parametrize(
    ("changes", "kind", "value", "cap"),
    [
        ({"request_rate": "inf", "max_concurrency": 8}, "concurrency", 8.0, None),
        ({"request_rate": 2.5, "max_concurrency": 8}, "rate", 2.5, 8),
        ({"request_rate": 2.5, "max_concurrency": None}, "rate", 2.5, None),
        ({"request_rate": "inf", "max_concurrency": None}, "concurrency", 40.0, None),  # all at once
    ],
)
def test_the_load_from_request_rate_and_max_concurrency(tmp_path: Path, changes, kind, value, cap) -> None:
    run = vllm_bench.read(_file(tmp_path, **changes))
    assert (run.level.kind, run.level.value, run.level.max_concurrency) == (kind, value, cap)
    if kind == "rate":
        assert run.level.arrival == "poisson"
    if changes["max_concurrency"] is None and kind == "concurrency":
        assert any("sent at once" in n for n in words(run.notes))


def test_a_ramp_up_is_not_one_load(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"ramp-up .* not read yet"):
        vllm_bench.read(_file(tmp_path, ramp_up_strategy="linear"))


def test_no_version_stated_is_said(tmp_path: Path) -> None:
    run = vllm_bench.read(_file(tmp_path, vllm_version=None))
    assert run.info["version"] is None and "vLLM version not stated in the file" in words(run.notes)[0]


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("Internal Server Error", ErrorCategory.HTTP),
        ("Traceback (most recent call last):\n  ...\nasyncio.TimeoutError", ErrorCategory.TIMEOUT),
        (
            "Traceback (most recent call last):\n  ...\naiohttp.ClientConnectorError: cannot connect",
            ErrorCategory.CONNECT,
        ),
        ("Never received a valid chunk to calculate TTFT.", ErrorCategory.MALFORMED),
        ("Traceback (most recent call last):\n  ...\naiohttp.ClientPayloadError: closed", ErrorCategory.DROPPED),
        ("Service Unavailable", ErrorCategory.HTTP),  # vLLM keeps `response.reason` of a non-200 answer
        ("Bad Gateway", ErrorCategory.HTTP),
        # the shared rule (fields.error_category) changed these three: a gateway's 504 is the server's answer, not
        # the client's timeout (was TIMEOUT); "timed out" is a timeout (was DROPPED); a server that disconnected had
        # been connected to (was CONNECT, from "connect" in "disconnected")
        ("Gateway Timeout", ErrorCategory.HTTP),
        ("Traceback (most recent call last):\n  ...\nOSError: read timed out", ErrorCategory.TIMEOUT),
        (
            "Traceback (most recent call last):\n  ...\naiohttp.ServerDisconnectedError: Server disconnected",
            ErrorCategory.DROPPED,
        ),
    ],
)
def test_a_failed_request_keeps_what_vllm_said(tmp_path: Path, text: str, category: ErrorCategory) -> None:
    run = vllm_bench.read(_file(tmp_path, errors=[text, *RAW["errors"][1:]], output_lens=[0, *RAW["output_lens"][1:]]))
    r = run.records[0]
    assert r.error is not None and r.error.category is category and not r.chunks
    assert r.error.message.startswith("vLLM bench serve: ") and "\n" not in r.error.message


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"ttfts": None}, r"no `ttfts`; write it with `vllm bench serve --save-result --save-detailed`"),
        ({"itls": {"a": 1}}, r"`itls` is not a list"),
        ({"ttfts": RAW["ttfts"][:-1]}, r"`input_lens` has 40 entries, `ttfts` 39"),
        ({"latencies": RAW["latencies"][:-1]}, r"`latencies` has 39 entries, `ttfts` 40"),
        ({"ttfts": ["fast", *RAW["ttfts"][1:]]}, r"`ttfts\[0\]` is 'fast', not a number"),
        ({"output_lens": [-1, *RAW["output_lens"][1:]]}, r"`output_lens\[0\]` is -1, not a token count"),
        ({"request_rate": "fast"}, r"read as a vLLM bench serve result: `request_rate` is 'fast'"),
        ({"itls": [0.1, *RAW["itls"][1:]]}, r"`itls\[0\]` is not a list of chunk gaps"),
        ({"itls": [["x"], *RAW["itls"][1:]]}, r"`itls\[0\]\[0\]` is 'x', not a number"),
        ({"start_times": [None, *RAW["start_times"][1:]]}, r"no `start_times\[0\]`"),
    ],
)
def test_a_bad_field_is_one_line_naming_file_format_and_field(tmp_path: Path, changes, message) -> None:
    f = _file(tmp_path, **changes)
    with pytest.raises(UserError, match=message) as e:
        vllm_bench.read(f)
    assert str(e.value).startswith(f"{f}: ") and "\n" not in str(e.value)


def test_detect_reads_the_setup_keys_at_the_head(tmp_path: Path) -> None:
    assert vllm_bench.detect(VLLM / "candidate.json")
    cut = tmp_path / "cut.json"
    cut.write_text((VLLM / "candidate.json").read_text()[:500])
    assert vllm_bench.detect(cut)  # detected, so that reading it says what is wrong
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"records": []}))
    assert not vllm_bench.detect(other) and not vllm_bench.detect(tmp_path) and not vllm_bench.detect(tmp_path / "x")


def test_a_directory_read_as_a_vllm_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"read as a vLLM bench serve result: Is a directory"):
        vllm_bench.read(tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", r"read as a vLLM bench serve result: it is a list, not an object$"),
        ('{"a": ', r"not JSON \(Expecting"),
    ],
)
def test_a_file_that_is_not_a_json_object_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "run.json"
    f.write_text(text)
    with pytest.raises(UserError, match=message):
        vllm_bench.read(f)
    with pytest.raises(UserError, match=r": no such file$"):
        vllm_bench.read(tmp_path / "gone.json")


def test_a_file_that_names_a_random_dataset_or_ignore_eos_says_acceptance_is_not_the_users(tmp_path: Path) -> None:
    # vLLM writes these only as --metadata (dataset_name=random ignore_eos=true): strings, as --metadata keeps them
    run = vllm_bench.read(_file(tmp_path, dataset_name="random", ignore_eos="true"))
    kinds = {n.kind.value: n.fields for n in run.notes if n.kind.value.startswith("acceptance_")}
    assert kinds == {
        "acceptance_synthetic_prompts": {"prompts": 40, "of": 40, "source": "random"},
        "acceptance_ignore_eos": {"source": "ignore_eos"},
    }
    assert "not your traffic's (the file's dataset is `random`" in " ".join(words(run.notes))
    # a dataset of real prompts, or a file that names none (vLLM's default): nothing said, nothing guessed
    for changes in ({"dataset_name": "sharegpt"}, {}):
        run = vllm_bench.read(_file(tmp_path, **changes))
        assert not [n for n in run.notes if n.kind.value.startswith("acceptance_")]
