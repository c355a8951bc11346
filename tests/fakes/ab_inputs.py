"""Synthetic A/B report inputs with known effects: the report must find exactly what was put in.

Each prompt i has a base TPOT (log-normal across prompts, so pairing matters) and an output length; each arm at
each load multiplies TPOT by a known factor with per-request noise. Closed loops are simulated slot by slot, so the
achieved concurrency is exactly what was asked unless `achieved_fraction` says otherwise. The candidate streams
several tokens per chunk (its acceptance), and reports counters like vLLM's.

Run as a script to write a sample run directory and its report: `python -m tests.fakes.ab_inputs OUT_DIR`.
"""

from __future__ import annotations

import math
import sys
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from speculab.harness.design import ArmInfo, LevelSpec, Setup
from speculab.harness.records import (
    AcceptanceSummary,
    ChunkEvent,
    ColdStartTimes,
    ErrorCategory,
    ErrorInfo,
    MemorySample,
    RequestRecord,
    RequestSpec,
    TokenCountSource,
)
from speculab.harness.results.ab_run import ABRun, ChangeCheck, RepeatRun

WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "a",
    "mat",
    "while",
    "code",
    "ran",
    "fast",
    "and",
    "the",
    "model",
    "wrote",
    "every",
    "token",
    "it",
    "could",
]


@dataclass(frozen=True)
class ArmEffect:
    """How one arm behaves: TPOT factor per level key (default 1), tokens per chunk, acceptance, memory."""

    tpot_factor: dict[str, float] = field(default_factory=dict)
    tokens_per_chunk: int = 1
    acceptance_length: float | None = None  # None: reports nothing (baseline); 1.0 with k -> no drafts
    k: int = 4
    achieved_fraction: dict[str, float] = field(default_factory=dict)  # per level: < 1 = client fell behind
    error_rate: float = 0.0
    gpu_bytes: float = 20e9
    diverge: dict[int, tuple[int, float]] = field(default_factory=dict)  # index -> (token position, top-2 gap)
    # The target's top-2 gap at a position without changing the text: the baseline's view of the same prefix.
    tie_at: dict[int, tuple[int, float]] = field(default_factory=dict)
    logprobs: bool = False
    # Per-request acceptance in each response (vLLM semantics): prompt i's acceptance length is acceptance_length
    # x exp(spread x z_i), and its TPOT speeds up in proportion (so length and speedup are related, as in reality).
    per_request_spread: float | None = None
    prefix_hit_rate: float | None = None  # vLLM prefix-cache counters in the run's deltas (prompt tokens)
    # Each repeat is a fresh launch of this arm's server: every request of it is slower or faster by a shared
    # exp(launch_sd x z_repeat) (GPU clocks, memory placement, graph capture), on top of the per-request noise.
    launch_sd: float = 0.0


def _words(rng: np.random.Generator, n: int) -> list[str]:
    return [" " + WORDS[int(j)] for j in rng.integers(0, len(WORDS), size=n)]


def _output_tokens(i: int, seed: int) -> list[str]:
    rng = np.random.default_rng([seed, 99, i])
    return _words(rng, 48 + int(rng.integers(0, 48)))


def _record(i: int, sent: float, tpot: float, ttft: float, toks: list[str], eff: ArmEffect, err: bool,
            scheduled: float | None = None) -> RequestRecord:  # fmt: skip
    scheduled = sent if scheduled is None else scheduled
    if err:
        return RequestRecord(
            i, scheduled, sent, sent + 0.05, error=ErrorInfo(ErrorCategory.HTTP, "503 Service Unavailable", 503)
        )
    chunks = []
    t = sent + ttft
    pos = 0
    per = eff.tokens_per_chunk
    while pos < len(toks):
        n = 1 if pos == 0 else min(per, len(toks) - pos)
        if pos > 0:
            t += tpot * n
        chunks.append(ChunkEvent(t, "".join(toks[pos : pos + n]), n))
        pos += n
    logprobs = None
    if eff.logprobs:
        logprobs = tuple({"token": tok, "logprob": -0.01, "top": {tok: -0.01, "<alt>": -3.0}} for tok in toks)
    return RequestRecord(
        index=i,
        scheduled_s=scheduled,
        sent_s=sent,
        end_s=t + 0.001,
        chunks=tuple(chunks),
        output_text="".join(toks),
        prompt_tokens=20,
        completion_tokens=len(toks),
        token_count_source=TokenCountSource.CONTINUOUS_USAGE,
        finish_reason="length",
        logprobs=logprobs,
    )


def make_run(arm: str, level: LevelSpec, repeat: int, items: list[RequestSpec], eff: ArmEffect, *, seed: int,
             temperature: float = 0.0) -> RepeatRun:  # fmt: skip
    """One repeat of one arm at one load: records with the arm's effect, acceptance counters, memory samples."""
    rng = np.random.default_rng([seed, zlib.crc32(arm.encode()) % 1000, int(level.value * 10), repeat])
    factor = eff.tpot_factor.get(level.key, 1.0)
    frac = eff.achieved_fraction.get(level.key, 1.0)
    # Batching: TPOT grows with load for everyone (a plain engine is ~25% slower at 16 than at 1).
    load_slowdown = 1.0 + 0.02 * (level.value - 1)
    z = np.random.default_rng([seed, zlib.crc32(arm.encode()) % 1000, repeat, 99]).standard_normal()
    launch = math.exp(eff.launch_sd * z)  # the same for every level of this launch
    records = []
    slots = [0.0] * (int(level.value) if level.kind == "concurrency" else 1)
    for n, it in enumerate(items):
        base_tpot = 0.02 * math.exp(0.4 * np.random.default_rng([seed, it.index]).standard_normal())
        tpot = base_tpot * load_slowdown * factor * math.exp(0.03 * rng.standard_normal()) * launch
        length_i = None
        if eff.per_request_spread is not None and eff.acceptance_length:
            z = np.random.default_rng([seed, 7, it.index]).standard_normal()
            length_i = max(1.05, eff.acceptance_length * math.exp(eff.per_request_spread * z))
            tpot *= eff.acceptance_length / length_i
        ttft = 0.05 * math.exp(0.1 * rng.standard_normal())
        toks = _output_tokens(it.index, seed if temperature == 0 else seed + repeat)
        if it.index in eff.diverge:
            pos, _gap = eff.diverge[it.index]
            toks = [*toks[:pos], " DIFFERENT", *toks[pos + 1 :]]
        err = rng.random() < eff.error_rate
        if level.kind == "concurrency":
            j = int(np.argmin(slots))
            sent = slots[j]
            if frac < 1.0:
                sent += 0.2 * (1 - frac) * (n + 1) / len(items)  # the client is slow to refill slots
            rec = _record(it.index, sent, tpot, ttft, toks, eff, err)
            slots[j] = rec.end_s if frac >= 1.0 else rec.end_s / frac
        else:
            sent = n / (level.value * frac)  # the client falls behind its schedule of n / rate
            rec = _record(it.index, sent, tpot, ttft, toks, eff, err, scheduled=n / level.value)
        if length_i is not None and rec.ok and rec.completion_tokens:
            drafts = max(1, round((rec.completion_tokens - 1) / length_i))
            accepted = min(rec.completion_tokens - 1 - drafts, drafts * eff.k)
            spec = {"drafts": drafts, "draft_tokens": drafts * eff.k, "accepted_tokens": accepted,
                    "source": "vllm metrics.speculative_decoding"}  # fmt: skip
            rec = replace(rec, speculation=spec)
        gaps = eff.tie_at | eff.diverge
        if eff.logprobs and rec.logprobs and it.index in gaps:
            pos, gap = gaps[it.index]
            lps = list(rec.logprobs)
            lps[pos] = {"token": toks[pos], "logprob": -0.5, "top": {toks[pos]: -0.5, " other": -0.5 - gap}}
            rec = replace(rec, logprobs=tuple(lps))
        records.append(rec)
    acc = None
    if eff.acceptance_length is not None:
        ok_tokens = sum(r.completion_tokens or 0 for r in records if r.ok)
        if eff.acceptance_length <= 1.0 or ok_tokens == 0:
            acc = AcceptanceSummary("vllm:spec_decode_* counters (server-wide delta)", False, 0.0, 0.0, 0.0)
        else:
            drafts = ok_tokens / eff.acceptance_length
            accepted = drafts * (eff.acceptance_length - 1)
            alpha = _alpha(eff.acceptance_length - 1, eff.k)
            per_pos = tuple(alpha ** (j + 1) for j in range(eff.k))
            scale = (eff.acceptance_length - 1) / sum(per_pos)
            per_pos = tuple(p * scale for p in per_pos)
            acc = AcceptanceSummary(
                "vllm:spec_decode_* counters (server-wide delta)",
                True,
                drafts,
                drafts * eff.k,
                accepted,
                accepted / (drafts * eff.k),
                eff.acceptance_length,
                per_pos,
            )
    end = max(r.end_s for r in records)
    mem = tuple(
        MemorySample(t, eff.gpu_bytes + 1e8 * math.sin(t), 3e9, min(1.0, 0.1 + 0.02 * level.value * (t / end)))
        for t in np.linspace(0, end, 30)
    )
    deltas: dict[str, float] = {}
    if eff.prefix_hit_rate is not None:
        queries = float(sum(r.prompt_tokens or 0 for r in records))
        deltas = {
            "vllm:prefix_cache_queries_total": queries,
            "vllm:prefix_cache_hits_total": queries * eff.prefix_hit_rate,
        }
    return RepeatRun(arm, level.key, repeat, tuple(records), acc, mem, "process", order=repeat, counter_deltas=deltas)


def _alpha(mean_accepted: float, k: int) -> float:
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if sum(mid ** (j + 1) for j in range(k)) < mean_accepted:
            lo = mid
        else:
            hi = mid
    return lo


def make_items(n: int) -> list[RequestSpec]:
    cats = ("code-edit", "rag-qa", "writing")
    return [
        RequestSpec(
            index=i,
            prompt=f"prompt {i}",
            category=cats[i % 3],
            seed=1000 + i,
            checks=({"type": "contains", "value": " the"},) if i % 2 == 0 else (),
            prompt_id=f"p{i}",
        )
        for i in range(n)
    ]


def make_inputs(
    *,
    n_prompts: int = 40,
    repeats: int = 2,
    levels: tuple[LevelSpec, ...] = (
        LevelSpec("concurrency", 1, ("low", "sweep")),
        LevelSpec("concurrency", 4, ("sweep",)),
        LevelSpec("concurrency", 16, ("operating", "sweep")),
    ),
    baseline: ArmEffect | None = None,
    candidates: dict[str, ArmEffect] | None = None,
    temperature: float = 0.0,
    seed: int = 0,
    skip: tuple[tuple[str, str], ...] = (),  # (arm, level key) pairs that never ran
    slo: bool = True,
) -> ABRun:
    baseline = baseline or ArmEffect()
    if candidates is None:
        candidates = {
            "ngram-k4": ArmEffect(
                tpot_factor={"c1": 1 / 1.8, "c4": 1 / 1.3, "c16": 1 / 0.9},
                tokens_per_chunk=3,
                acceptance_length=2.9,
                gpu_bytes=20.4e9,
            )
        }
    items = make_items(n_prompts)
    arms = [
        ArmInfo(
            "baseline",
            "plain",
            "http://127.0.0.1:8000",
            "vllm",
            ("python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m", "--port", "8000"),
            usd_per_hour=2.5,
            cold_start=ColdStartTimes(31.0, 32.5),
        )
    ]
    changes = []
    for name, eff in candidates.items():
        method, k = name.split("-k")[0], int(name.split("-k")[1]) if "-k" in name else eff.k
        arms.append(
            ArmInfo(
                name,
                f"{method} k={k}",
                "http://127.0.0.1:8000",
                "vllm",
                (*arms[0].command, "--speculative-config", f'{{"method":"{method}","num_speculative_tokens":{k}}}'),
                method,
                k,
                usd_per_hour=2.5,
                cold_start=ColdStartTimes(33.0, 34.0),
            )
        )
        changes.append(ChangeCheck(name, (f'+ --speculative-config {{"method":"{method}"}}',), True))
    setup = Setup(
        name="",
        workload_name="builtin:grounded",
        workload_source="built-in set v1",
        api="completions",
        items=tuple(items),
        temperature=temperature,
        max_tokens=96,
        levels=levels,
        repeats=repeats,
        slo_tpot_s=0.03 if slo else None,
        slo_ttft_s=0.5 if slo else None,
        target_rate_rps=40.0 if slo else None,
        logprobs=2 if baseline.logprobs else None,
        started_utc="2026-11-29T20:00:00Z",
        finished_utc="2026-11-29T20:20:00Z",
    )
    runs = []
    effects = {"baseline": baseline, **candidates}
    for lv in levels:
        for r in range(1, repeats + 1):
            for arm, eff in effects.items():
                if (arm, lv.key) in skip:
                    continue
                runs.append(make_run(arm, lv, r, items, eff, seed=seed, temperature=temperature))
    return ABRun(setup, tuple(arms), tuple(changes), tuple(runs))


def _sent_at(rec: RequestRecord, sent_s: float) -> RequestRecord:
    """The same request sent at `sent_s` (exactly: requests sent together stay together)."""
    d = sent_s - rec.sent_s
    chunks = tuple(replace(c, t_s=c.t_s + d) for c in rec.chunks)
    return replace(rec, scheduled_s=sent_s, sent_s=sent_s, end_s=rec.end_s + d, chunks=chunks)


def interleave_two_url(inputs: ABRun, block_size: int, *, record_windows: bool = True) -> ABRun:
    """The same requests as two-URL mode runs them: per level and repeat, blocks of `block_size` prompts, arms taking
    turns ABBA, each block starting its closed loop afresh (every slot free) once the previous block has ended.
    Each request keeps its duration and chunk timing; `windows_s` records each block's span unless told not to."""
    out: list[RepeatRun] = []
    for lv in inputs.setup.levels:
        slots_n = int(lv.value) if lv.kind == "concurrency" else 1
        for rep in range(1, inputs.setup.repeats + 1):
            runs = {a.name: next(r for r in inputs.runs_for(a.name, lv.key) if r.repeat == rep) for a in inputs.arms}
            recs: dict[str, list[RequestRecord]] = {name: [] for name in runs}
            windows: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
            by_index = {name: sorted(r.records, key=lambda x: x.index) for name, r in runs.items()}
            n = max(len(v) for v in by_index.values())
            t = 0.0
            names = list(runs)
            for bi, first in enumerate(range(0, n, block_size)):
                for name in names if (bi + rep) % 2 == 1 else names[::-1]:
                    slots = [t] * slots_n
                    placed = []
                    for r in by_index[name][first : first + block_size]:
                        j = int(np.argmin(slots))
                        moved = _sent_at(r, slots[j])
                        slots[j] = moved.end_s
                        placed.append(moved)
                    end = max(x.end_s for x in placed)
                    recs[name] += placed
                    windows[name].append((t, end))
                    t = end + 0.01  # the other arm's block follows
            for name, r in runs.items():
                kept = tuple(windows[name]) if record_windows else ()
                out.append(replace(r, records=tuple(recs[name]), windows_s=kept))
    return replace(inputs, runs=tuple(out))


def with_check_failures(inputs: ABRun, arm: str, n: int) -> ABRun:
    """The same inputs with `arm` failing the check of its first `n` checked prompts (its text no longer contains
    what the check wants); every other record as it was."""
    checked = [it.index for it in inputs.setup.items if it.checks][:n]
    runs = []
    for run in inputs.runs:
        if run.arm == arm:
            recs = tuple(replace(r, output_text="x") if r.index in checked else r for r in run.records)
            run = replace(run, records=recs)
        runs.append(run)
    return replace(inputs, runs=tuple(runs))


def main(out: str) -> None:
    """Write a sample A/B run directory (two candidates, a sweep, one near-tie and one confident divergence)."""
    from speculab.harness.results.ab_dir import save_inputs
    from speculab.report.render import render_run_dir

    inputs = make_inputs(
        n_prompts=60,
        repeats=3,
        levels=(
            LevelSpec("concurrency", 1, ("low", "sweep")),
            LevelSpec("concurrency", 2, ("sweep",)),
            LevelSpec("concurrency", 4, ("sweep",)),
            LevelSpec("concurrency", 8, ("operating", "sweep")),
            LevelSpec("concurrency", 16, ("sweep",)),
        ),
        baseline=ArmEffect(logprobs=True, tie_at={3: (10, 0.02), 7: (20, 2.5)}, prefix_hit_rate=0.9),
        candidates={
            "ngram-k4": ArmEffect(
                tpot_factor={"c1": 1 / 1.8, "c2": 1 / 1.6, "c4": 1 / 1.3, "c8": 1 / 1.05, "c16": 1 / 0.85},
                tokens_per_chunk=3,
                acceptance_length=2.9,
                gpu_bytes=20.4e9,
                logprobs=True,
                diverge={3: (10, 0.02), 7: (20, 2.5)},
                per_request_spread=0.3,
                prefix_hit_rate=0.55,
            ),
            "draft_model-k4": ArmEffect(
                tpot_factor={"c1": 1 / 1.4, "c2": 1 / 1.3, "c4": 1 / 1.1, "c8": 1 / 0.9, "c16": 1 / 0.75},
                tokens_per_chunk=2,
                acceptance_length=2.2,
                gpu_bytes=21.5e9,
                logprobs=True,
            ),
        },
    )
    root = Path(out)
    save_inputs(root, inputs)
    render_run_dir(root)
    print(root / "report.html")


if __name__ == "__main__":
    main(sys.argv[1])
