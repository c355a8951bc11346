"""A-vs-A through the whole lifecycle against the mock server: how often identical arms are called different.

Three setups (`--mode`):

* `one-server` (the default, and the setup recorded on 2026-11-29): one mock server behind both URLs, 16 prompts
  at concurrency 1; counts how often the geometric mean's BCa interval excludes 1 (speculab's verdict before
  2026-11-29) and how often the signed-rank verdict (`compare_paired`) says there is a difference. It calls
  `compare_paired` directly, so it never sees the report's gates.
* `two-url`: two identical mock servers, one per arm, as a user comparing two deployed endpoints would run it
  (`speculab run` with `baseline.url` and `candidate.url`, default warmup); judged by the **report's** verdict
  (`build_report`), gates included, at every load level. Before 2026-12-01 every such comparison was gated "load
  not achieved" (each arm's load was measured over the other arm's blocks too).
* `launch`: the same mock command launched once per arm and repeat (launch mode), judged the same way.

By default the only noise is the machine's own (event loop, a busy two-core VM), which is heavy-tailed; `--jitter`
adds the integration test's seeded clock jitter. 5 % "different" is what a 95 % interval promises.

Since the margin (#23), two-url and launch count the report's **decision** (faster / slower beyond the margin,
equivalent within it, inconclusive) beside the detectable-difference verdict; `--effect 1.10` makes the candidate
stream tokens 1.10x faster (a power check), `--repeats 3` relaunches each arm three times (launch mode: the launch
as the unit).

Usage: `PYTHONPATH=src python bench/a_vs_a_mock.py [--mode two-url] [--runs 40] [--first-seed 0] [--jitter]
[--loads c1,c4] [--prompts 24] [--effect 1.0] [--margin 3%] [--repeats 1] [--json out.json]`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.harness.analysis.comparison.metric_comparison import Direction, MetricComparison
from speculab.harness.analysis.comparison.paired import compare_paired
from speculab.harness.results.ab_dir import load_inputs
from speculab.harness.servers.process import free_port, port_in_use
from speculab.harness.verdict.build import build_report
from speculab.harness.verdict.comparison import per_prompt
from speculab.harness.verdict.model import ReportOptions
from speculab.mock.script import MockConfig
from speculab.mock.server import mock_server_in_thread

JITTER_S = 0.0018  # the integration test's: +-1.8 ms on each clock reading
MOCK = MockConfig(ttft_s=0.002, gap_s=0.004, output_tokens=6)  # one-server: the integration test's ~26 ms requests
# two-url / launch: ~100 ms requests in their own processes, as a deployed server would be. With 26 ms requests on
# a loaded 2-core VM the client's ~1 ms turnaround between a response and the next send is 4-8 % of each request at
# concurrency 4: the load gate then refuses (rightly) in launch mode as in two-URL mode.
SERVED = MockConfig(ttft_s=0.010, gap_s=0.008, output_tokens=12)
SRC = str(Path(__file__).resolve().parents[1] / "src")


def _clock(seed: int, jitter: bool) -> Callable[[], float]:
    if not jitter:
        return time.perf_counter
    rng = np.random.default_rng(seed)
    return lambda: time.perf_counter() + float(rng.uniform(-JITTER_S, JITTER_S))


def _loads_yaml(loads: list[str]) -> str:
    """'c1,c4' -> {low: {concurrency: 1}, sweep: [...]} (a single level is the operating point)."""
    levels = [f"{{concurrency: {int(k[1:])}}}" for k in loads]
    if len(levels) == 1:
        return f"{{low: {levels[0]}, operating: {levels[0]}}}"
    return f"{{low: {levels[0]}, operating: {levels[-1]}, sweep: [{', '.join(levels)}]}}"


def _yaml(seed: int, loads: list[str], arms: str, warmup: int, max_tokens: int = 6, prompts: int = 16) -> str:
    return f"""
workload: {{spec: "synthetic:input=10,output=8", num_prompts: {prompts}, warmup_requests: {warmup}}}
sampling: {{max_tokens: {max_tokens}, seed: {seed}}}
loads: {_loads_yaml(loads)}
speculation: {{method: ngram, num_speculative_tokens: 4}}
{arms}
"""


def one_server_run(url: str, out: Path, seed: int, jitter: bool) -> MetricComparison:
    arms = f'baseline: {{url: "{url}"}}\ncandidate: {{url: "{url}"}}'
    plan = plan_experiment(parse_experiment(_yaml(seed, ["c1"], arms, warmup=1)))
    plan = dataclasses.replace(plan, memory_interval_s=10.0)
    asyncio.run(run_plan(plan, out, clock=_clock(seed, jitter)))
    inputs = load_inputs(out)
    return compare_paired(
        "tpot_s",
        per_prompt(inputs.runs_for("ngram-k4", "c1"), "tpot_s"),
        per_prompt(inputs.runs_for("baseline", "c1"), "tpot_s"),
        np.random.default_rng(seed),
        n_resamples=1000,
    )


def _mock_args(port: int, effect: float = 1.0) -> list[str]:
    """The mock's command; `effect` > 1 streams each token that many times faster (a scripted TPOT speedup)."""
    args = [sys.executable, "-m", "speculab", "mock-server", "--port", str(port)]
    args += ["--ttft-ms", f"{SERVED.ttft_s * 1e3:g}", "--gap-ms", f"{SERVED.gap_s * 1e3 / effect:g}"]
    return [*args, "--output-tokens", str(SERVED.output_tokens)]


@contextlib.contextmanager
def _served(effect: float = 1.0) -> Iterator[str]:
    """`speculab mock-server` in its own process, as a deployed endpoint; yields its URL."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen(_mock_args(port, effect), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not port_in_use("127.0.0.1", port):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mock-server on port {port} did not start (exit {proc.poll()})")
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def report_verdicts(arms_yaml: str, out: Path, seed: int, jitter: bool, loads: list[str], prompts: int,
                    extra: str = "") -> dict[str, tuple[str, str, float]]:  # fmt: skip
    """One run through `speculab run`'s library path; per load level the report's TPOT (verdict, decision against
    the margin, speedup), gates included: a gated comparison's verdict and decision say why."""
    y = _yaml(seed, loads, arms_yaml, warmup=4, max_tokens=SERVED.output_tokens, prompts=prompts) + extra
    plan = plan_experiment(parse_experiment(y))
    plan = dataclasses.replace(plan, memory_interval_s=10.0)
    asyncio.run(run_plan(plan, out, clock=_clock(seed, jitter)))
    report = build_report(load_inputs(out), ReportOptions(n_resamples=1000, seed=seed))
    out_: dict[str, tuple[str, str, float]] = {}
    for lv in report.levels:
        c = lv.comparisons[0]
        tp = c.metric("tpot_s")
        out_[lv.key] = (c.verdict, c.decision, tp.speedup if tp is not None else float("nan"))
    return out_


@contextlib.contextmanager
def _arms(mode: str, effect: float = 1.0) -> Iterator[Callable[[], str]]:
    """Yields a function giving the experiment file's arm sections for one run; the candidate's tokens stream
    `effect` times faster (1: A-vs-A)."""
    if mode == "two-url":
        with _served() as a, _served(effect) as b:
            yield lambda: f'baseline: {{url: "{a}"}}\ncandidate: {{url: "{b}"}}'
        return

    def launch() -> str:
        port = free_port()
        return (
            f"baseline: {{launch: {{engine: other, command: {json.dumps(_mock_args(port))}, port: {port}, "
            f'env: {{PYTHONPATH: "{SRC}"}}, ready_timeout_s: 60}}}}\n'
            f"candidate: {{command: {json.dumps(_mock_args(port, effect))}}}"
        )

    yield launch


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("one-server", "two-url", "launch"), default="one-server")
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--jitter", action="store_true", help="add the integration test's seeded clock jitter")
    ap.add_argument("--loads", default="c1", help="two-url / launch: comma-separated levels, e.g. c1,c4")
    ap.add_argument("--prompts", type=int, default=24, help="two-url / launch: prompts per run (6 groups of 4 at c4)")
    ap.add_argument("--effect", type=float, default=1.0, help="the candidate streams tokens this many times faster")
    ap.add_argument("--margin", default="", help="the experiment's `margin:` (default: speculab's, 3%%)")
    ap.add_argument("--repeats", type=int, default=1, help="repeats (launch mode: each relaunches both arms)")
    ap.add_argument("--json", default="", help="write the counts and every run's answer here")
    a = ap.parse_args(argv)
    noise = "test jitter + machine noise" if a.jitter else "machine noise only"
    seeds = range(a.first_seed, a.first_seed + a.runs)
    t0 = time.perf_counter()
    if a.mode == "one-server":
        old = new = 0
        with mock_server_in_thread(MOCK) as url, tempfile.TemporaryDirectory() as tmp:
            for seed in seeds:
                c = one_server_run(url, Path(tmp) / str(seed), seed, a.jitter)
                old += c.geomean_ratio.excludes(1.0)
                new += c.verdict is not Direction.NO_DIFFERENCE
        print(
            f"{noise}, {a.runs} A-vs-A runs of 16 prompts: BCa geometric-mean interval excludes 1 in {old} "
            f"({old / a.runs:.0%}); signed-rank verdict says a difference in {new} ({new / a.runs:.0%})"
        )
        return
    loads = a.loads.split(",")
    extra = (f"margin: {a.margin}\n" if a.margin else "") + (f"repeats: {a.repeats}\n" if a.repeats > 1 else "")
    verdicts: dict[str, Counter[str]] = {k: Counter() for k in loads}
    decisions: dict[str, Counter[str]] = {k: Counter() for k in loads}
    rows = []
    with _arms(a.mode, a.effect) as arms, tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            got = report_verdicts(arms(), Path(tmp) / str(seed), seed, a.jitter, loads, a.prompts, extra)
            for key, (v, d, sp) in got.items():
                verdicts[key][v.split(" requests in flight")[0]] += 1  # "no verdict: baseline: 3.7" -> gated
                decisions[key][d] += 1
                rows.append({"seed": seed, "level": key, "verdict": v, "decision": d, "speedup": sp})
    load = os.getloadavg()[0]
    what = "A-vs-A" if a.effect == 1 else f"candidate {a.effect:g}x faster per token"
    print(f"{a.mode}, {noise}, {what}, {a.runs} runs (seeds {seeds.start}-{seeds.stop - 1}) of {a.prompts} prompts, "
          f"repeats {a.repeats}, margin {a.margin or 'default'}, {time.perf_counter() - t0:.0f} s; "
          f"load average {load:.1f}")  # fmt: skip
    for key in loads:
        dec = ", ".join(f"{d}: {n} ({n / a.runs:.1%})" for d, n in decisions[key].most_common())
        ver = ", ".join(f"{v}: {n}" for v, n in verdicts[key].most_common())
        print(f"  {key}: decisions {dec}\n       (detectable-difference verdicts: {ver})")
    if a.json:
        Path(a.json).write_text(json.dumps({
            "mode": a.mode, "effect": a.effect, "runs": a.runs, "first_seed": a.first_seed, "prompts": a.prompts,
            "repeats": a.repeats, "margin": a.margin or "default", "loads": loads, "jitter": a.jitter,
            "wall_s": round(time.perf_counter() - t0, 1), "load_average_end": load,
            "machine": f"{os.cpu_count()} CPUs, {os.uname().machine}", "date_utc": time.strftime("%Y-%m-%d %H:%M",
                                                                                               time.gmtime()),
            "decisions": {k: dict(v) for k, v in decisions.items()},
            "verdicts": {k: dict(v) for k, v in verdicts.items()}, "rows": rows,
        }, indent=1) + "\n")  # fmt: skip


if __name__ == "__main__":
    main()
