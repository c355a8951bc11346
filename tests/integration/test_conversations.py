"""Multi-turn conversations end to end: an A/B against mock servers over HTTP, each arm's later turns sent behind
its own earlier answers, paired per (conversation, turn), and turns behind differing answers left out."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.verdict.build import build_report
from speculab.mock.requests import MockConfig
from speculab.mock.server import mock_server_in_thread
from speculab.report.phrases import warning_lines

CONVERSATIONS = 8
TURNS = 3
# 10 ms between tokens: with 1 ms, a busy CI machine read a whole answer in one chunk now and then, its TPOT was 0
# and the pair was (rightly) dropped, so "every turn pairs" failed for the client's lateness, not the pairing
GAP_S = 0.01


def conversation_file(path: Path) -> Path:
    lines = []
    for c in range(CONVERSATIONS):
        turns = [f"conversation {c} turn {t} asks something new" for t in range(1, TURNS + 1)]
        lines.append(json.dumps({"id": f"c{c}", "category": "even" if c % 2 == 0 else "odd", "turns": turns}))
    path.write_text("\n".join(lines) + "\n")
    return path


def experiment(url_a: str, url_b: str, workload: Path, concurrency: int, api: str) -> str:
    return f"""
workload: {{spec: "jsonl:{workload}", warmup_requests: 0, api: {api}}}
sampling: {{max_tokens: 16, seed: 0}}
loads: {{operating: {{concurrency: {concurrency}}}}}
baseline: {{url: "{url_a}"}}
candidate: {{url: "{url_b}"}}
speculation: {{method: ngram, num_speculative_tokens: 2}}
"""


def run(tmp_path: Path, cfg_a: MockConfig, cfg_b: MockConfig, concurrency: int, api: str = "completions"):
    wl = conversation_file(tmp_path / "conversations.jsonl")
    out = tmp_path / "run"
    with mock_server_in_thread(cfg_a) as url_a, mock_server_in_thread(cfg_b) as url_b:
        plan = plan_experiment(parse_experiment(experiment(url_a, url_b, wl, concurrency, api)))
        asyncio.run(run_plan(plan, out))
    inputs = load_inputs(out)
    return inputs, build_report(inputs)


def test_identical_servers_pair_every_turn_and_break_the_speedup_down_by_turn(tmp_path: Path) -> None:
    cfg = MockConfig(ttft_s=0.002, gap_s=GAP_S, output_tokens=5)
    inputs, report = run(tmp_path, cfg, cfg, concurrency=2)
    items = inputs.setup.items
    assert len(items) == CONVERSATIONS * TURNS
    level = inputs.setup.levels[-1].key
    for arm in ("baseline", "ngram-k2"):
        (rep,) = inputs.runs_for(arm, level)
        recs = {r.index: r for r in rep.records if not r.warmup}
        assert len(recs) == len(items) and all(r.ok for r in recs.values())
        sent = ""
        for it in items:
            r = recs[it.index]
            assert (r.conversation_id, r.turn) == (it.conversation_id, it.turn) and r.context_sha256
            if it.turn == 1:
                sent = it.prompt
            else:
                before = recs[it.index - 1]
                assert r.sent_s >= before.end_s  # turn k+1 only after turn k
                # this turn's prompt is the last one, its answer verbatim, and the new user turn (the mock counts
                # the words of what it received)
                sent = sent + before.output_text + it.prompt
                assert r.prompt_tokens == len(sent.split()) > before.prompt_tokens + before.completion_tokens
    comp = report.level(level).comparison("ngram-k2")
    assert comp.diverged == 0
    assert [m.metric for m in comp.by_turn] == ["turn 1", "turn 2", "turn 3"]
    assert all(m.n_pairs == CONVERSATIONS for m in comp.by_turn)
    assert [m.metric for m in comp.by_category] == ["even", "odd"]
    tpot = comp.metric("tpot_s")
    assert tpot.n_pairs == len(items) and tpot.group_size == 2 and tpot.n_units == CONVERSATIONS // 2
    summary = report.to_dict()["levels"][0]["comparisons"][0]
    assert {"by_turn", "by_prompt_length", "diverged"} <= set(summary)


def test_turns_behind_answers_that_differ_are_left_out_and_counted(tmp_path: Path) -> None:
    """The candidate answers with 7 words where the baseline answers with 5: every turn after the first carries a
    different context in the two arms, so only first turns pair."""
    base = MockConfig(ttft_s=0.002, gap_s=GAP_S, output_tokens=5)
    cand = MockConfig(ttft_s=0.002, gap_s=GAP_S, output_tokens=7)
    inputs, report = run(tmp_path, base, cand, concurrency=1, api="chat")
    level = inputs.setup.levels[-1].key
    comp = report.level(level).comparison("ngram-k2")
    later = CONVERSATIONS * (TURNS - 1)
    assert comp.diverged == later
    assert comp.metric("tpot_s").n_pairs == CONVERSATIONS
    (b,) = inputs.runs_for("baseline", level)
    (c,) = inputs.runs_for("ngram-k2", level)
    b_tok = {r.index: r.prompt_tokens for r in b.records}
    c_tok = {r.index: r.prompt_tokens for r in c.records}
    for it in inputs.setup.items:  # each arm's turn carried its own, longer or shorter, earlier answers
        assert c_tok[it.index] - b_tok[it.index] == 2 * (it.turn - 1)
    cand_report = report.candidate("ngram-k2")
    assert any("conversation turns were not compared" in w for w in warning_lines(cand_report.correctness.warnings))
