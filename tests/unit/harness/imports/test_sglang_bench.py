"""SGLang bench_serving JSONL -> ImportedRun on small in-test lines: several runs in one file (--benchmark N),
failed requests, the native backend's split gaps, sends rebuilt from the load, refused loads, one-line errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fakes.words import words
from speculab.errors import UserError
from speculab.harness.imports import sglang_bench
from speculab.harness.records import ErrorCategory


def _line(n: int = 3, *, backend: str = "sglang-oai", cap: int | None = 2, rate: float = math.inf, **extra) -> dict:
    return {
        "tag": None, "backend": backend, "dataset_name": "custom", "request_rate": rate, "max_concurrency": cap,
        "input_lens": [10 + i for i in range(n)], "output_lens": [3] * n, "ttfts": [0.02] * n,
        "itls": [[0.03, 0.03]] * n, "generated_texts": ["a b c"] * n, "errors": [""] * n, **extra,
    }  # fmt: skip


def _write(tmp_path: Path, *lines: dict) -> Path:
    f = tmp_path / "sglang.jsonl"
    f.write_text("".join(json.dumps(d) + "\n" for d in lines))  # json writes inf as Infinity, as SGLang's file
    return f


def test_a_line_reads_as_chunks_and_rebuilt_sends(tmp_path: Path) -> None:
    run = sglang_bench.read(_write(tmp_path, _line()))
    assert sglang_bench.detect(tmp_path / "sglang.jsonl")
    assert run.level.key == "c2" and run.input_lens == (10, 11, 12)
    first = run.records[0]
    assert [c.t_s for c in first.chunks] == pytest.approx([0.02, 0.05, 0.08]) and first.end_s == pytest.approx(0.08)
    assert [r.sent_s for r in run.records] == pytest.approx([0.0, 0.0, 0.08])  # the third as the first ended
    assert run.records[2].sent_s - run.records[2].scheduled_s == pytest.approx(0.08)  # waited for a slot


def test_the_native_backend_keeps_the_first_and_last_token_only(tmp_path: Path) -> None:
    run = sglang_bench.read(_write(tmp_path, _line(backend="sglang", itls=[[0.01, 0.01, 0.04]] * 3)))
    assert [c.t_s for c in run.records[0].chunks] == pytest.approx([0.02, 0.08])  # split gaps are not chunks


def test_several_runs_need_benchmark_n(tmp_path: Path) -> None:
    f = _write(tmp_path, _line(), _line(cap=4))
    with pytest.raises(UserError, match=r"an SGLang file of 2 runs .*--benchmark N \(0-based, 0 to 1\)"):
        sglang_bench.read(f)
    assert sglang_bench.read(f, 1).level.key == "c4"
    with pytest.raises(UserError, match=r"--benchmark 2: the file holds 2 run"):
        sglang_bench.read(f, 2)
    assert sglang_bench.read(_write(tmp_path, _line()), 3).level.key == "c2"  # a file of one run is that one


def test_a_failed_request_is_an_error_record(tmp_path: Path) -> None:
    d = _line(errors=["", "Traceback (most recent call last):\n  ...\nTimeoutError: timed out", "Not Found: nope"])
    run = sglang_bench.read(_write(tmp_path, d))
    assert (
        run.records[1].error.category is ErrorCategory.TIMEOUT and run.records[2].error.category is ErrorCategory.HTTP
    )
    assert not run.records[1].chunks and run.records[0].ok


FIXTURE_500 = (
    'Internal Server Error: {"error": {"message": "mock fault: internal server error", "type": "server_error", '
    '"param": null, "code": "mock_fault"}}'
)  # as in tests/fixtures/imports/sglang/errors.jsonl
TB = "Traceback (most recent call last):\n  ...\n"


@pytest.mark.parametrize(
    ("text", "category", "status"),
    [
        (FIXTURE_500, ErrorCategory.HTTP, 500),
        ("Not Found: nope", ErrorCategory.HTTP, 404),
        ("Bad Gateway: could not connect to upstream", ErrorCategory.HTTP, 502),
        # the shared rule changed these two: an answer with a status is HTTP whatever its body says (was TIMEOUT);
        # "timed out" is a timeout (was DROPPED)
        ("Gateway Timeout: upstream request timeout", ErrorCategory.HTTP, 504),
        (TB + "aiohttp.ClientConnectorError: Cannot connect to host", ErrorCategory.CONNECT, None),
        (TB + "aiohttp.ClientPayloadError: Response payload is not completed", ErrorCategory.DROPPED, None),
        (TB + "TimeoutError", ErrorCategory.TIMEOUT, None),
        (TB + "OSError: read timed out", ErrorCategory.TIMEOUT, None),
    ],
)
def test_the_category_of_sglangs_error_texts(tmp_path: Path, text: str, category: ErrorCategory, status) -> None:
    r = sglang_bench.read(_write(tmp_path, _line(errors=[text, "", ""]))).records[0]
    assert (r.error.category, r.error.status) == (category, status)
    assert r.error.message.startswith("SGLang bench_serving: ") and "\n" not in r.error.message


def test_loads_and_acceptance(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"--request-rate 4: its send times are random draws .*not read yet"):
        sglang_bench.read(_write(tmp_path, _line(rate=4.0)))
    run = sglang_bench.read(_write(tmp_path, _line(cap=None, accept_length=2.5)))
    assert run.level.key == "c3" and "all 3 requests were sent at once" in words(run.notes)[-1]
    assert [r.sent_s for r in run.records] == [0.0] * 3
    assert run.acceptance.acceptance_length == 2.5 and "accept_length" in run.acceptance.source


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "the file is empty"),
        ('{"tag": null, "backend": "x"', "line 1: not JSON"),
        (json.dumps({k: v for k, v in _line().items() if k != "itls"}), "no `itls`; write it with"),
        (json.dumps(_line() | {"ttfts": [0.02]}), "`input_lens` has 3 entries, `ttfts` 1"),
        (json.dumps(_line() | {"itls": [[0.03, "x"]] * 3}), "`itls[0][1]` is 'x', not a number"),
        (json.dumps(_line() | {"input_lens": [-1, 2, 3]}), "`input_lens[0]` is -1, not a token count"),
    ],
)
def test_a_bad_file_is_one_line(tmp_path: Path, text: str, says: str) -> None:
    f = tmp_path / "bad.jsonl"
    f.write_text(text)
    with pytest.raises(UserError) as e:
        sglang_bench.read(f)
    assert str(e.value).startswith(f"{f}: read as an SGLang bench_serving result: ") and says in str(e.value)
    assert "\n" not in str(e.value)


def test_a_line_on_a_random_dataset_says_acceptance_is_not_the_users(tmp_path: Path) -> None:
    run = sglang_bench.read(_write(tmp_path, _line(dataset_name="random")))
    (note,) = [n for n in run.notes if n.kind.value == "acceptance_synthetic_prompts"]
    assert note.fields == {"prompts": 3, "of": 3, "source": "random"}
    assert not [n for n in sglang_bench.read(_write(tmp_path, _line())).notes if n.kind.value.startswith("acc")]
