"""Two-URL mode end to end against mock servers: warmup of any size, achieved load measured per arm, a dead arm."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.fakes.words import words

from integration.mock_process import mock_child
from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.errors import EndpointError
from speculab.harness.load.runner import Progress
from speculab.harness.records import ErrorCategory
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.verdict.build import build_report
from speculab.mock.requests import MockConfig
from speculab.mock.server import mock_server_in_thread

FAST = MockConfig(ttft_s=0.002, gap_s=0.002, output_tokens=4)


def two_url_yaml(url_a: str, url_b: str, *, prompts: int, warmup: int, loads: str, seed: int = 0) -> str:
    return f"""
workload: {{spec: "synthetic:input=10,output=8", num_prompts: {prompts}, warmup_requests: {warmup}}}
sampling: {{max_tokens: 4, seed: {seed}}}
loads: {loads}
baseline: {{url: "{url_a}"}}
candidate: {{url: "{url_b}"}}
speculation: {{method: ngram, num_speculative_tokens: 2}}
"""


@pytest.mark.parametrize(
    ("concurrency", "block_size"),
    [(1, None), (2, None), (4, 3)],  # blocks of 2, 8 and 3 requests
)
@pytest.mark.slow
def test_any_warmup_runs_with_blocks_smaller_than_it(tmp_path: Path, concurrency: int, block_size: int | None) -> None:
    """Warmup used to index the first block with the warmup request's number: more warmup requests than a block
    holds (3+ at concurrency 1, whose blocks are 2 requests) was an IndexError. Warmup now sends the workload's
    first prompts (cycled), as launch mode does, once per arm."""
    prompts = 10
    with mock_server_in_thread(FAST) as url_a, mock_server_in_thread(FAST) as url_b:
        for warmup in (0, 2, 3, 4, 8, 13):
            loads = f"{{operating: {{concurrency: {concurrency}}}}}"
            y = two_url_yaml(url_a, url_b, prompts=prompts, warmup=warmup, loads=loads)
            plan = dataclasses.replace(plan_experiment(parse_experiment(y)), block_size=block_size)
            out = tmp_path / f"w{warmup}"
            outcome = asyncio.run(run_plan(plan, out))
            inputs = load_inputs(out)
            levels = len(inputs.setup.levels)  # low (concurrency 1, the default) and operating
            assert not outcome.interrupted and outcome.runs == 2 * levels
            for arm in inputs.arms:
                runs = [r for r in inputs.runs if r.arm == arm.name]
                warm = [r for run in runs for r in run.records if r.warmup]  # once per arm, before its first block
                assert sorted(r.index for r in warm) == sorted(i % prompts for i in range(warmup))
                for run in runs:
                    measured = [r for r in run.records if not r.warmup]
                    assert sorted(r.index for r in measured) == list(range(prompts))  # each prompt once: pairing key
                    assert all(r.ok for r in run.records)


class KillAfter:
    """A Reporter that kills a server once the given arm has finished `n` measured requests of its current block
    (counted over the run)."""

    def __init__(self, label: str, n: int, kill: Callable[[], None]):
        self.label, self.n, self.kill = label, n, kill
        self.arm = ""
        self.done = 0
        self.killed = False

    def phase(self, text: str) -> None:
        pass

    def level_start(self, arm: str, level: str, repeat: int, total: int, *, done: int = 0) -> None:
        self.arm = arm

    def progress(self, p: Progress) -> None:
        if self.arm == self.label and not p.warmup and p.finished and not self.killed:
            self.done += 1
            if self.done >= self.n:
                self.killed = True
                self.kill()

    def level_end(self) -> None:
        pass


@pytest.mark.parametrize("concurrency", [1, 3])
@pytest.mark.slow
def test_a_dead_arm_stops_the_run_with_an_endpoint_error_and_keeps_what_finished(
    tmp_path: Path, concurrency: int
) -> None:
    """The candidate's server is killed mid-level: the run stops after a few refused connections (not hundreds),
    both arms' partial repeat is kept and marked interrupted, and the error names the arm and its URL."""
    slow = {"ttft_s": 0.005, "gap_s": 0.01, "output_tokens": 6}  # ~60 ms requests
    with mock_child(**slow) as (url_a, _), mock_child(**slow) as (url_b, cand):
        loads = f"{{low: {{concurrency: {concurrency}}}, operating: {{concurrency: {concurrency}}}}}"  # one level
        y = two_url_yaml(url_a, url_b, prompts=200, warmup=2, loads=loads)
        plan = plan_experiment(parse_experiment(y))
        reporter = KillAfter("ngram k=2", 5, cand.kill)
        out = tmp_path / "run"
        with pytest.raises(EndpointError) as e:
            asyncio.run(run_plan(plan, out, reporter=reporter))
    msg = str(e.value)
    assert "\n" not in msg
    level = f"c{concurrency}"
    when = f"during level concurrency {concurrency}, repeat 1"
    assert f"candidate ngram-k2 endpoint {url_b} stopped answering {when}" in msg
    assert "requests in a row could not connect (Connect call failed" in msg and "probes of /v1/models" in msg
    assert f"`speculab run --resume {out}` finishes the run" in msg
    inputs = load_inputs(out)
    assert inputs.interrupted and any("the run stopped on an error" in n for n in words(inputs.notes))
    assert [(r.arm, r.level, r.interrupted) for r in sorted(inputs.runs, key=lambda r: r.order)] == [
        ("baseline", level, True),
        ("ngram-k2", level, True),
    ]
    base, cand_run = inputs.runs_for("baseline", level)[0], inputs.runs_for("ngram-k2", level)[0]
    assert base.records and all(r.ok for r in base.records)
    failed = [r for r in cand_run.records if not r.ok]
    connect = [r for r in failed if r.error is not None and r.error.category is ErrorCategory.CONNECT]
    # the threshold's refusals, plus what was in flight or already past the gate when the check began
    assert len(connect) >= 3 and len(failed) <= 3 + 2 * concurrency, [r.error for r in failed]
    assert sum(r.ok for r in cand_run.records) >= 5
    report = build_report(inputs)  # the partial run makes a report, gated on the candidate's errors
    assert report.interrupted and report.level(level).comparison("ngram-k2").gate == "errors"


@pytest.mark.slow
def test_cli_run_stops_on_a_dead_arm_with_one_line_exit_3_and_a_report(tmp_path: Path) -> None:
    """`speculab run` in two-URL mode after the candidate's server died: one line naming it, exit 3, the partial
    report rendered (before this, the run went on for minutes of connection errors and exited 0)."""
    slow = {"ttft_s": 0.005, "gap_s": 0.01, "output_tokens": 6}
    with mock_child(**slow) as (url_a, _), mock_child(**slow) as (url_b, cand):
        exp = tmp_path / "exp.yaml"
        exp.write_text(two_url_yaml(url_a, url_b, prompts=400, warmup=4, loads="{operating: {concurrency: 2}}"))
        out = tmp_path / "run"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COLUMNS": "160"}
        cmd = [sys.executable, "-m", "speculab", "run", str(exp), "--output", str(out)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        requests = out / "runs" / "ngram-k2" / "c1" / "r1" / "requests.jsonl"
        deadline = time.time() + 60
        while time.time() < deadline and (not requests.is_file() or len(requests.read_text().splitlines()) < 10):
            time.sleep(0.1)
        cand.kill()
        _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3, stderr
    assert "Traceback" not in stderr
    lines = [ln for ln in stderr.splitlines() if "stopped answering" in ln]
    assert len(lines) == 1 and lines[0].startswith("error: candidate ngram-k2 endpoint " + url_b), stderr
    assert (out / "report.html").is_file() and (out / "summary.json").is_file()
    inputs = load_inputs(out)
    assert inputs.interrupted and all(r.interrupted for r in inputs.runs)
    failed = [r for run in inputs.runs for r in run.records if not r.ok]
    assert 3 <= len(failed) <= 10  # stopped after a few refusals, not 400 of them


def test_rate_load_blocks_each_get_their_own_part_of_the_schedule(tmp_path: Path) -> None:
    """Every block of a rate load used to restart the arrival process with the run's seed, replaying the same first
    gaps in each block (a fixed burst pattern, not the seeded process). Now block k has its own seed: the same for
    both arms (a prompt's two measurements see the same arrivals), different from block to block."""
    with mock_server_in_thread(FAST) as url_a, mock_server_in_thread(FAST) as url_b:
        y = two_url_yaml(url_a, url_b, prompts=12, warmup=0, loads="{operating: {rate: 40}}")
        plan = dataclasses.replace(plan_experiment(parse_experiment(y)), block_size=3)
        asyncio.run(run_plan(plan, tmp_path / "run"))
    inputs = load_inputs(tmp_path / "run")

    def gaps(arm: str) -> list[tuple[float, ...]]:
        (run,) = inputs.runs_for(arm, "r40")
        assert len(run.windows_s) == 4  # one window per block
        out = []
        for b in range(4):
            sched = sorted(r.scheduled_s for r in run.records if r.index // 3 == b)
            out.append(tuple(round(t - sched[0], 9) for t in sched))
        return out

    base, cand = gaps("baseline"), gaps("ngram-k2")
    assert base == cand
    assert len(set(base)) == 4, base
