"""The plan of a run from several client workers (`--workers N`): which conversations each worker sends and at what
load, the same for the same items, load and N (load.coordinator runs it)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from speculab.errors import UserError
from speculab.harness.load.arrivals import send_offsets
from speculab.harness.load.runner import LoadConfig
from speculab.harness.records import RequestSpec
from speculab.harness.workload.conversation import conversations


def split(total: int, n: int) -> list[int]:
    """`total` over n workers, the first ones one more when it does not divide: 10 over 4 -> 3 3 2 2."""
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


@dataclass(frozen=True, slots=True)
class WorkerPlan:
    """What one worker runs: its items (workload indices kept) and its load."""

    worker: int
    items: tuple[RequestSpec, ...]
    load: LoadConfig
    total: int = 0  # the whole workload's items (all workers): numbers a cycled share's repeats


def plan_workers(items: Sequence[RequestSpec], load: LoadConfig, n: int) -> list[WorkerPlan]:
    """The partition and each worker's load; the same for the same items, load and n.

    With `duration_s` the workload is cycled, as one process cycles it: a closed-loop worker cycles its own share
    until the duration (each repeat numbered as the single-process run numbers it: pass c over item i is index
    c * len(items) + i); an open loop's global schedule is drawn up to the duration (or num_prompts arrivals),
    arrival k starting conversation k mod the conversations' count on its worker.
    """
    if n < 1:
        raise UserError(f"--workers must be at least 1, got {n}")
    convs = list(conversations(items))
    if len(convs) < n:
        raise UserError(f"--workers {n} needs at least {n} prompts (conversations); the run has {len(convs)}")
    total = len(items)
    starts: list[float] | None = None
    endless = load.duration_s is not None
    if load.arrival is not None:  # one global seeded schedule, as the single-process run draws it
        gen = send_offsets(load.arrival, np.random.default_rng(load.seed))
        if endless:
            limit = load.num_prompts
            starts = list(itertools.takewhile(lambda t: t < load.duration_s, itertools.islice(gen, limit)))
        else:
            starts = [next(gen) for _ in convs]
    elif load.trace_speed is not None:  # a trace is replayed once, even with a duration (which then cuts it)
        first = min(c[0].arrival_s or 0.0 for c in convs)
        starts = [((c[0].arrival_s or 0.0) - first) / load.trace_speed for c in convs]
    parts: list[list[RequestSpec]] = [[] for _ in range(n)]
    if starts is not None:
        for k, t in enumerate(starts):
            j, c = k % len(convs), k // len(convs)
            conv = [repeat_of(s, c, total) for s in convs[j]]
            # the turn that starts it carries its absolute start offset
            parts[j % n] += [dataclasses.replace(conv[0], arrival_s=t), *conv[1:]]
    else:
        for j, conv in enumerate(convs):
            parts[j % n] += conv
    if any(not p for p in parts):
        raise UserError(f"--workers {n}: the schedule has only {len(starts or ())} arrivals, fewer than the workers")
    warm = split(load.warmup, n)
    if load.arrival is None and load.trace_speed is None:
        assert load.concurrency is not None
        if load.concurrency < n:
            raise UserError(f"--workers {n} needs --concurrency of at least {n} (one stream per worker at least)")
        conc = split(load.concurrency, n)
        if endless:  # cycled until the duration; a --num-prompts cap is shared out like the streams
            caps: list[int | None] = split(load.num_prompts, n) if load.num_prompts is not None else [None] * n
        else:
            caps = [len(p) for p in parts]
        loads = [dataclasses.replace(load, concurrency=conc[i], num_prompts=caps[i], warmup=warm[i]) for i in range(n)]
    else:
        streams = split(load.concurrency, n) if load.concurrency is not None else [None] * n
        loads = [
            LoadConfig(
                concurrency=streams[i],
                num_prompts=len(parts[i]),
                duration_s=load.duration_s,  # a conversation's later turns stop at it, as in one process
                warmup=warm[i],
                seed=load.seed,
                trace_speed=1.0,
                trace_origin_s=0.0,
                send_spin_s=load.send_spin_s,
            )
            for i in range(n)
        ]
    return [WorkerPlan(i, tuple(parts[i]), loads[i], total) for i in range(n)]


def repeat_of(spec: RequestSpec, cycle: int, total: int) -> RequestSpec:
    """Pass `cycle` over the workload, numbered as a single process numbers its cycled run."""
    return spec if cycle == 0 else dataclasses.replace(spec, index=cycle * total + spec.index)
