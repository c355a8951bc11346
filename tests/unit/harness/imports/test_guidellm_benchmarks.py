"""GuideLLM benchmarks.json -> ImportedRun on small in-test data: TTFT/ITL in ms and latency in s, requests in the
order GuideLLM queued them though listed by status and completion, errored and incomplete requests, the load, YAML,
a sweep, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speculab.errors import UserError
from speculab.harness.imports import guidellm_benchmarks as gl
from speculab.harness.records import ErrorCategory


def _req(k: int, start: float, *, n: int = 5, error: str | None = None) -> dict:
    body = {"prompt": f"prompt {k}", "max_tokens": n}
    return {
        "request_id": f"id-{k}", "request_args": json.dumps({"body": body}), "output": "x" * n,
        "info": {"error": error, "timings": {"queued": 100.0 + k, "targeted_start": start - 0.01}},
        "request_start_time": start, "request_latency": 0.2, "prompt_tokens": 10 + k, "output_tokens": n,
        "time_to_first_token_ms": 40.0, "inter_token_latency_ms": 30.0,
        "time_per_output_token_ms": 999.0,  # counts the first token: never read
    }  # fmt: skip


def _file(tmp_path: Path, requests: dict, strategy=None, n_benchmarks: int = 1) -> Path:
    b = {
        "type_": "generative_benchmark",
        "start_time": 1.0,
        "config": {"strategy": strategy or {"type_": "concurrent", "streams": 2, "max_concurrency": 2}},
        "requests": {"successful": [], "errored": [], "incomplete": []} | requests,
    }
    f = tmp_path / "benchmarks.json"
    f.write_text(json.dumps({"metadata": {"guidellm_version": "0.8.1"}, "benchmarks": [b] * n_benchmarks}))
    return f


def test_times_from_the_per_request_fields_not_time_per_output_token(tmp_path: Path) -> None:
    run = gl.read(_file(tmp_path, {"successful": [_req(0, 5.0)]}))
    r = run.records[0]
    assert r.sent_s == 5.0 and r.scheduled_s == pytest.approx(4.99)
    assert r.chunks[0].t_s - r.sent_s == pytest.approx(0.040)
    assert (r.chunks[-1].t_s - r.chunks[0].t_s) / (5 - 1) == pytest.approx(0.030)  # TPOT 30 ms, not 999
    assert r.end_s - r.sent_s == pytest.approx(0.2) and r.completion_tokens == 5 and r.prompt_tokens == 10
    assert run.items[0].prompt == "prompt 0" and run.level.key == "c2" and run.info["version"] == "0.8.1"
    one = gl.read(_file(tmp_path, {"successful": [_req(0, 5.0, n=1)]})).records[0]
    assert len(one.chunks) == 1


def test_requests_go_in_the_order_they_were_queued(tmp_path: Path) -> None:
    # listed by status, each list as completed; request 2 started a moment before request 1 (another worker)
    reqs = {"successful": [_req(2, 1.004), _req(0, 1.0)], "errored": [_req(1, 1.005, error="HTTP 500: boom")]}
    run = gl.read(_file(tmp_path, reqs))
    assert [it.prompt for it in run.items] == ["prompt 0", "prompt 1", "prompt 2"]
    assert run.input_lens == (10, 11, 12) and [r.index for r in run.records] == [0, 1, 2]
    failed = run.records[1]
    assert not failed.ok and failed.error.category is ErrorCategory.HTTP and "boom" in failed.error.message


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("HTTP 500: boom", ErrorCategory.HTTP),
        ("Server error '500 Internal Server Error' for url 'http://127.0.0.1:8000/v1/completions'", ErrorCategory.HTTP),
        ("ConnectError: [Errno 111] Connection refused", ErrorCategory.CONNECT),
        ("ReadTimeout: timed out", ErrorCategory.TIMEOUT),
        # the shared rule changed this one: a connection the peer closed had been made (was CONNECT, from "connection")
        ("peer closed connection without sending complete message body", ErrorCategory.DROPPED),
        ("Traceback (most recent call last):\n  ...\nValueError: bad chunk", ErrorCategory.HTTP),
    ],
)
def test_the_category_of_guidellms_error_texts(tmp_path: Path, text: str, category: ErrorCategory) -> None:
    r = gl.read(_file(tmp_path, {"errored": [_req(0, 1.0, error=text)]})).records[0]
    assert r.error.category is category and r.error.message.startswith("GuideLLM: ") and "\n" not in r.error.message


def test_an_incomplete_request_was_cut_off_not_failed(tmp_path: Path) -> None:
    run = gl.read(_file(tmp_path, {"successful": [_req(0, 1.0)], "incomplete": [_req(1, 1.1)]}))
    assert run.records[1].error.category is ErrorCategory.CANCELLED


@pytest.mark.parametrize(
    ("strategy", "key"),
    [
        ({"type_": "synchronous"}, "c1"),
        ({"type_": "constant", "rate": 3.0}, "r3"),
        ({"type_": "poisson", "rate": 0.5, "max_concurrency": 4}, "r0.5"),
        ({"type_": "throughput", "max_concurrency": 16}, "c16"),
    ],
)
def test_the_load_from_the_strategy(tmp_path: Path, strategy: dict, key: str) -> None:
    assert gl.read(_file(tmp_path, {"successful": [_req(0, 1.0)]}, strategy)).level.key == key


def test_a_sweep_needs_one_benchmark_picked(tmp_path: Path) -> None:
    f = _file(tmp_path, {"successful": [_req(0, 1.0)]}, n_benchmarks=3)
    with pytest.raises(UserError, match=r"a GuideLLM file of 3 benchmarks .* --benchmark N \(0-based, 0 to 2\)"):
        gl.read(f)
    assert gl.read(f, 2).info["benchmark"] == 2
    with pytest.raises(UserError, match=r"--benchmark 5: the file holds 3"):
        gl.read(f, 5)


def test_yaml_reads_as_json_does(tmp_path: Path) -> None:
    import yaml

    f = _file(tmp_path, {"successful": [_req(0, 1.0)]})
    y = tmp_path / "benchmarks.yaml"
    y.write_text(yaml.safe_dump(json.loads(f.read_text())))
    assert gl.detect(y) and gl.read(y).records == gl.read(f).records


def test_a_missing_field_is_one_line_naming_it(tmp_path: Path) -> None:
    req = _req(0, 1.0)
    del req["inter_token_latency_ms"]
    with pytest.raises(
        UserError, match=r"GuideLLM benchmarks file: no `benchmarks\[0\]\.requests.successful\[0\]\.inter"
    ):
        gl.read(_file(tmp_path, {"successful": [req]}))
    f = tmp_path / "empty.json"
    f.write_text(json.dumps({"metadata": {"guidellm_version": "0.8.1"}}))
    with pytest.raises(UserError, match=r"no `benchmarks`"):
        gl.read(f)
