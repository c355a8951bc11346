"""`speculab bench --workers N`: the load spread over client processes, one requests.jsonl like a single process's,
every request accounted for, and an open-loop schedule identical to the single-process one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakes.cli_runner import one_line_error, run_main
from integration.mock_process import mock_process

FAST = dict(ttft_s=0.005, gap_s=0.004, output_tokens=6)


def bench(capsys, url: str, out: Path, *flags: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr)"""
    return run_main(capsys, "bench", "--url", url, "--workload", "synthetic:input=20,output=6", "--output", str(out),
                    *flags)  # fmt: skip


def records(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_two_workers_account_for_every_request_in_one_file_shaped_like_a_single_process_run(capsys, tmp_path):
    with mock_process(**FAST) as url:
        code, _, err = bench(capsys, url, tmp_path / "w2", "--num-prompts", "256", "--concurrency", "64",
                             "--workers", "2", "--warmup", "4")  # fmt: skip
        assert code == 0, err
        code, _, err = bench(capsys, url, tmp_path / "w1", "--num-prompts", "256", "--concurrency", "64",
                             "--warmup", "4")  # fmt: skip
        assert code == 0, err
        code, _, err = bench(capsys, url, tmp_path / "bad", "--num-prompts", "8", "--concurrency", "1",
                             "--workers", "2")  # fmt: skip
        assert code == 2 and "--workers 2 needs --concurrency of at least 2" in one_line_error(err)
    two, one = records(tmp_path / "w2"), records(tmp_path / "w1")
    measured = [r for r in two if not r["warmup"]]
    assert sorted(r["index"] for r in measured) == list(range(256)) and sum(r["warmup"] for r in two) == 4
    assert {tuple(sorted(r)) for r in two} == {tuple(sorted(r)) for r in one}  # the same record shape
    s = json.loads((tmp_path / "w2" / "summary.json").read_text())
    c = s["counts"]
    assert c["sent"] == c["ok"] + c["error"] == 256 and c["warmup"] == 4
    assert s["client"]["cpu_share"] >= 0 and s["client"]["loop_lag_s"]["n"] > 0
    m = json.loads((tmp_path / "w2" / "manifest.json").read_text())
    assert [(w["worker"], w["requests"], w["load"]["concurrency"]) for w in m["workers"]] == [
        (0, 128, 32),
        (1, 128, 32),
    ]
    assert all(w["start_lag_s"] is not None and w["start_lag_s"] >= 0 for w in m["workers"])


@pytest.mark.slow
def test_an_open_loop_schedule_is_the_single_process_one(capsys, tmp_path):
    with mock_process(**FAST) as url:
        for name, extra in (("one", ()), ("two", ("--workers", "2"))):
            code, _, err = bench(capsys, url, tmp_path / name, "--num-prompts", "120", "--rate", "100", *extra)
            assert code == 0, err
    one = sorted(records(tmp_path / "one"), key=lambda r: r["index"])
    two = sorted(records(tmp_path / "two"), key=lambda r: r["index"])
    t1 = [r["scheduled_s"] - one[0]["scheduled_s"] for r in one]
    t2 = [r["scheduled_s"] - two[0]["scheduled_s"] for r in two]
    # the same seeded offsets, within the workers' own start lags (each records how late its clock started) plus
    # 1 ms: a loaded machine makes the lags larger (1.75 ms off once, in a full run beside two others), not the schedule
    ws = json.loads((tmp_path / "two" / "manifest.json").read_text())["workers"]
    slack = max(w["start_lag_s"] for w in ws) + 1e-3
    assert max(abs(a - b) for a, b in zip(t1, t2, strict=True)) < slack, slack


def test_each_worker_reads_the_engines_own_fields_as_one_process_does(capsys, tmp_path):
    """The engine's reader travels with the endpoint to each worker: every response's vLLM `metrics` is read into its
    record's `spec` there, as in the bench's own process."""
    spec = dict(FAST, num_speculative_tokens=3, per_request_spec_metrics=True, tokens_per_chunk=(1, 2))
    with mock_process(**spec) as url:
        for name, extra in (("one", ()), ("two", ("--workers", "2"))):
            code, _, err = bench(capsys, url, tmp_path / name, "--num-prompts", "8", "--concurrency", "2", *extra)
            assert code == 0, err
    one, two = records(tmp_path / "one"), records(tmp_path / "two")
    assert len(two) == len(one) == 8
    for r in one + two:
        assert r["spec"]["source"] == "vllm metrics.speculative_decoding" and r["spec"]["drafts"] > 0, r["spec"]
    assert sorted(json.dumps(r["spec"]) for r in one) == sorted(json.dumps(r["spec"]) for r in two)
