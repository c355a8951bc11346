"""A phased load through `speculab run` in launch mode (issue 52): two mock servers as the engine, the candidate two
tokens per chunk with its gaps growing by a tenth per extra stream (faster alone, slower at 32 streams: the truth is
`mock.truth.true_tpot_speedup`, 2x at 1 and 0.49x at 32), and a stall of 600 ms on every stream running when its
load rises above 8 (`--switch-above`). Through concurrency 1 -> 32 -> 1 the verdict is faster in both low phases and
slower in the high one, each with its interval; the transition into the high phase holds the stalls and the tail."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from fakes.cli_runner import run_main
from speculab.harness.servers.process import free_port
from speculab.mock.script import MockConfig
from speculab.mock.truth import true_tpot_speedup

SRC = str(Path(__file__).resolve().parents[2] / "src")
BASE = ["--ttft-ms", "2", "--gap-ms", "40", "--output-tokens", "9"]
CAND = ["--tokens-per-chunk", "2", "--decode-slowdown", "0.1", "--switch-above", "8", "--switch-stall-ms", "600"]


def mock(port: int, *extra: str) -> str:
    return json.dumps([sys.executable, "-m", "speculab", "mock-server", "--port", str(port), *BASE, *extra])


def test_the_script_is_faster_alone_and_slower_at_32_streams() -> None:
    base = MockConfig(ttft_s=0.002, gap_s=0.04, output_tokens=9)
    cand = MockConfig(ttft_s=0.002, gap_s=0.04, output_tokens=9, tokens_per_chunk=2, decode_slowdown_per_request=0.1)
    assert true_tpot_speedup(base, cand, 1) == pytest.approx(2.0)
    assert true_tpot_speedup(base, cand, 32) == pytest.approx(2 / 4.1)


@pytest.mark.slow
@pytest.mark.paced  # the mock's scripted times, held loosely: beside paced tests, not ordinary ones
def test_a_phased_load_is_judged_phase_by_phase(tmp_path: Path, capsys) -> None:
    port = free_port()
    exp = tmp_path / "exp.yaml"
    exp.write_text(
        f"""
workload: {{spec: "synthetic:input=10,output=9", num_prompts: 20, warmup_requests: 1}}
checks: false
sampling: {{max_tokens: 9}}
loads:
  transition_s: 1
  phases:
    - {{concurrency: 1, duration_s: 3}}
    - {{concurrency: 32, duration_s: 5.5}}
    - {{concurrency: 1, duration_s: 3.5}}
baseline:
  launch: {{engine: other, command: {mock(port)}, port: {port}, env: {{PYTHONPATH: "{SRC}"}}}}
speculation: {{method: ngram, num_speculative_tokens: 1}}
candidate: {{command: {mock(port, *CAND)}}}
""",
        encoding="utf-8",
    )
    out = tmp_path / "run"
    code, _, err = run_main(capsys, "run", str(exp), "--output", str(out))
    assert code == 0, err
    phases = json.loads((out / "summary.json").read_text(encoding="utf-8"))["phases"]
    assert [(p["kind"], p["value"], p["start_s"], p["end_s"]) for p in phases] == [
        ("concurrency", 1, 0, 3),
        ("concurrency", 32, 3, 8.5),
        ("concurrency", 1, 8.5, 12),
    ]

    def tpot(window: dict) -> dict:
        return next(m for m in window["metrics"] if m["metric"] == "tpot_s")

    low1, high, low2 = (tpot(p["steady"]) for p in phases)
    for low in (low1, low2):
        assert low["decision"] == "faster" and 1.5 < low["speedup_low"] <= low["speedup_high"] < 2.6, low
    assert high["decision"] == "slower" and 0.3 < high["speedup_low"] <= high["speedup_high"] < 0.7, high
    assert all(p["steady"]["answers"] for p in phases)  # every window has the recommendation's answer
    # the switch's stalls land in the transition into the high phase, on the candidate's side only
    into = {a["arm"]: a for a in phases[1]["transition"]["arms"]}
    assert phases[1]["transition"]["start_s"] == 3 and phases[1]["transition"]["end_s"] == 4
    assert into["ngram-k1"]["stalled_requests"] >= 3 and into["baseline"]["stalled_requests"] == 0, into
    assert into["ngram-k1"]["e2e_p99_s"] > 0.6 + into["baseline"]["e2e_p99_s"], into
    steady = {a["arm"]: a for a in phases[1]["steady"]["arms"]}
    assert steady["ngram-k1"]["stalled_requests"] == 0, steady


@pytest.mark.slow
def test_in_two_url_mode_each_arm_runs_the_schedule_whole(tmp_path: Path, capsys) -> None:
    """Two servers already running (`baseline.url`, `candidate.url`): each arm runs the whole schedule in turn, and
    every phase is judged; the candidate's 2 tokens a chunk at the same gaps come out faster in each."""
    from mock_process import mock_process

    with (
        mock_process(ttft_s=0.002, gap_s=0.02, output_tokens=9) as a,
        mock_process(ttft_s=0.002, gap_s=0.02, output_tokens=9, tokens_per_chunk=2) as b,
    ):
        exp = tmp_path / "exp.yaml"
        exp.write_text(
            f"""
workload: {{spec: "synthetic:input=10,output=9", num_prompts: 12, warmup_requests: 1}}
checks: false
sampling: {{max_tokens: 9}}
loads: {{transition_s: 0.5, phases: [{{concurrency: 1, duration_s: 2}}, {{concurrency: 4, duration_s: 2}}]}}
baseline: {{url: "{a}"}}
candidate: {{url: "{b}"}}
speculation: {{method: ngram, num_speculative_tokens: 1}}
""",
            encoding="utf-8",
        )
        out = tmp_path / "run"
        code, _, err = run_main(capsys, "run", str(exp), "--output", str(out))
    assert code == 0, err
    phases = json.loads((out / "summary.json").read_text(encoding="utf-8"))["phases"]
    assert [(p["value"], p["start_s"], p["end_s"]) for p in phases] == [(1, 0, 2), (4, 2, 4)]
    for p in phases:
        tpot = next(m for m in p["steady"]["metrics"] if m["metric"] == "tpot_s")
        assert tpot["decision"] == "faster", tpot
    assert all((out / "runs" / arm / "phased").is_dir() for arm in ("baseline", "ngram-k1"))
