"""Issue 28's done-means on the demo engine, made small enough for the suite: an experiment with two n-gram k and
plain at concurrency 1 and 4 through `speculab run`, whose recommendation agrees with each load's verdict and is
printed, whose recommended.yaml (just the winner, a verified single change) `speculab run` accepts and re-verifies
(never slower, and consistent with the first run where the candidate was chosen), and whose recommended flags are
the ones that re-run launched (so the engine accepted them). The full experiment (k=2/4/8 and the draft at 1/4/16)
is bench/recommend_demo.yaml, measured in docs/recommendation.md."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from fakes.cli_runner import run_main
from speculab.commands.run.plan import plan_experiment
from speculab.config import parse_experiment
from speculab.harness.servers.process import free_port

# a speedup measured on the demo engine must come out faster: alone on the machine
pytestmark = pytest.mark.serial

pytest.importorskip("torch")


def _experiment(port: int) -> str:
    command = json.dumps([sys.executable, "-m", "speculab", "serve", "demo", "--port", str(port)])
    # 24 prompts make 6 groups of 4 at concurrency 4: the fewest the verdict needs there
    return f"""
name: recommend demo small
workload: {{spec: builtin:grounded, num_prompts: 24, warmup_requests: 1}}
sampling: {{max_tokens: 32}}
loads:
  low: {{concurrency: 1}}
  operating: {{concurrency: 4}}
  sweep: [{{concurrency: 1}}, {{concurrency: 4}}]
baseline:
  launch: {{engine: speculab, command: {command}, port: {port}}}
speculation:
  - {{method: ngram, num_speculative_tokens: 4}}
  - {{method: ngram, num_speculative_tokens: 8}}
# this test is about re-verifying what ships (issue 28); TTFT and E2E on a shared 2-core machine are too noisy at 24
# prompts to hold as guardrails here (tests/integration/test_recommend_guardrails.py tests them)
guardrails: []
# nor about stream against unary (tests/integration/test_stream_defect_launch.py): its 8 unary requests an arm are a
# sixth of this run's demo-engine time, and this test holds the machine alone
checks: {{stream_unary: 0}}
"""


@pytest.mark.slow
def test_recommendation_on_the_demo_engine_is_re_verified_from_recommended_yaml(tmp_path: Path, capsys) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text(_experiment(free_port()), encoding="utf-8")
    first = tmp_path / "first"
    code, out, err = run_main(capsys, "run", str(exp), "--output", str(first))
    assert code == 0, err
    assert "recommendation:" in out and "to ship:" in err  # the terminal says what to ship
    summary = json.loads((first / "summary.json").read_text())
    rec = summary["recommendation"]
    # the bands agree with the per-load verdicts: each load's choice is that load's best where it ships, plain where
    # every candidate is shown not to pay, undecided otherwise (issue 36)
    best = {lv["key"]: lv["best"] or "baseline" for lv in summary["levels"]}
    for c in rec["loads"]:
        here = {a["candidate"]: a["answer"] for a in rec["answers"] if a["level"] == c["level"]}
        if c["answer"] == "ship":
            assert c["choice"] == best[c["level"]] or c["kept_over"] == best[c["level"]], c
        else:
            assert "ship" not in here.values() and c["choice"] == {"plain": "baseline"}.get(c["answer"], "undecided")
            assert c["answer"] == "undecided" or set(here.values()) == {"plain"}, (c, here)
    assert [v for b in rec["bands"] for v in b["loads"]] == [1, 4]
    # every arm at every load in the Pareto data, and the page shows the block first, with the flags written after
    assert len(rec["pareto"]) == 3 * 2
    page = (first / "report.html").read_text(encoding="utf-8")
    assert page.index('id="recommendation"') < page.index('id="verdict"')

    # n-gram k=8 drafting on the grounded set pays on the demo engine at concurrency 1 with 32-token answers
    # (bench/results/recommend_demo_2026-12-03.json: 1.69x [1.50-1.93]; with 16 tokens, k=2 and k=8 were within
    # 0.93-1.04x on a loaded CI machine: too short an answer for drafting to pay there)
    assert rec["form"] != "plain" and rec["loads"][0]["choice"] != "baseline", rec["loads"]
    flags = (first / "recommended-flags.txt").read_text(encoding="utf-8").splitlines()
    assert "The config to ship" in page
    # recommended.yaml is an experiment with just the winner, and only speculation differs from the baseline in it
    again = parse_experiment((first / "recommended.yaml").read_text(encoding="utf-8"), "recommended.yaml")
    # just the winner, or each band's choice where the choice depends on the load (a per-load schedule)
    assert again.speculations and all(sp.method == "ngram" for sp in again.speculations)
    assert any("--speculative-config" in ln for ln in flags)
    assert all(c.verified for c in plan_experiment(again).changes)
    second = tmp_path / "second"
    code, _, err = run_main(capsys, "run", str(first / "recommended.yaml"), "--output", str(second))
    assert code == 0, err
    re_summary = json.loads((second / "summary.json").read_text())
    shipped = rec["winner"] or rec["bands"][0]["choice"]
    cand = re_summary["candidates"][0]  # the winner (first where there are several)
    assert cand["name"] == shipped or cand["name"].startswith(shipped.split("-k")[0]), (cand["name"], shipped)
    # the flags recommended-flags.txt gives are what the re-run launched: the engine started with them and answered
    add = next(ln for ln in flags if not ln.startswith("#"))
    arms = json.loads((second / "inputs.json").read_text())["arms"]
    launched = [a["command"] for a in arms if a["name"] != "baseline"]
    assert any(shlex.join(cmd).endswith(add) for cmd in launched), (add, launched)
    arms_launched = {x["arm"] for x in json.loads((second / "launches.json").read_text())}
    assert arms_launched == {"baseline", *(c["name"] for c in re_summary["candidates"])}
    # the verdict reproduces where the shipped candidate was chosen: never slower, and the re-run's TPOT speedup
    # interval overlaps the first run's (this small run's intervals are wide on a shared 2-core machine; the
    # measured example in docs/recommendation.md re-verifies the full experiment's winner as faster again)
    # Every form ships what the first run measured where it ships it: the candidate as measured, drafts off above a
    # load (plain decoding there); a per-load k (k=8 at one load, k=4 at the other) ships the lowest band's k with
    # drafts off above its edge (the engine's adaptive k, which it once shipped unmeasured, re-verified at 0.89x
    # [0.85-0.93] at concurrency 1 where fixed k=8 had measured 2.36x [1.80-3.36]: a clean-clone rehearsal,
    # 2026-12-06 12:30 UTC). So the re-run is never slower where the first run shipped.
    first_at = {c["level"]: c for c in rec["loads"] if c["answer"] == "ship"}  # undecided loads ship nothing
    checked = 0
    for lv in re_summary["levels"]:
        if lv["key"] in first_at:
            was = first_at[lv["key"]]
            r = next(x for x in lv["ranking"] if x["candidate"] == cand["name"])
            assert r["gate"] == "ok", (lv["key"], r)
            assert r["decision"] != "slower", (lv["key"], r)
            if was["choice"] == cand["name"] and rec["form"] == "single":  # the very same: intervals overlap
                assert r["speedup_low"] <= was["speedup_high"] and was["speedup_low"] <= r["speedup_high"], (r, was)
            checked += 1
    assert checked >= 1
