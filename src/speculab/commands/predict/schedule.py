"""The predicted best k per load band in the engine's own words (issue 49 item 5): one speculative config that changes
k with the batch where the engine takes one (vLLM's `num_speculative_tokens_per_batch_size` in releases that have it,
the reference engine's adaptive schedule), else the lowest band's k with the edge where it stops paying said; the
same spelling `speculab run`'s recommendation uses (`commands.run.recommended`).

The global maximum K stays the candidate's measured K in every form, so that the KV cache is sized as for the
candidate that ran (vLLM's own tuning guide asks for that when comparing k per batch size)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from speculab.commands.run.recommended import SCHEDULE_END, Recommended, spelt
from speculab.config import SpeculationConfig
from speculab.harness.search.predict import KBand
from speculab.harness.servers.adapters import adapter_for, engine_kinds
from speculab.harness.servers.adapters.base import ByLoad


def batch_schedule(bands: Sequence[KBand]) -> list[list[int]]:
    """[[first batch size, last, k], ...] from 1 upwards: each band up to the last whole batch size it covers, the
    last band to SCHEDULE_END (plain: k 0); neighbours with the same k merged."""
    out: list[list[int]] = []
    start = 1
    for i, b in enumerate(bands):
        last = max(start, math.floor(b.high)) if i + 1 < len(bands) else SCHEDULE_END
        if out and out[-1][2] == b.k:
            out[-1][1] = last
        else:
            out.append([start, last, b.k])
        start = last + 1
    return out


def engine_schedule(sp: SpeculationConfig, bands: Sequence[KBand], engine: str, version: str) -> Recommended:
    """The prediction's k schedule for candidate `sp` spelt for `engine` (release `version`, "" when unknown)."""
    schedule = batch_schedule(bands)
    ks = {k for _, _, k in schedule}
    if ks == {0}:
        return Recommended(None, (), "plain", ("no k is predicted to pay anywhere in the range: keep plain decoding",))
    if len(schedule) == 1:
        return spelt(replace(sp, num_speculative_tokens=schedule[0][2]), engine, "single", ())
    first_k = schedule[0][2] or next(k for _, _, k in schedule if k)
    first = replace(sp, num_speculative_tokens=first_k)
    off_above = len(ks - {0}) == 1 and schedule[-1][2] == 0 and schedule[0][2] != 0 and len(schedule) == 2
    asked = ByLoad(
        "off-above" if off_above else "per-load",
        first,
        schedule[0][1],
        sp.num_speculative_tokens,  # the global maximum K: the measured one
        True,  # one method and model: only k changes between bands
        schedule,
        version,
    )
    said = adapter_for(engine).by_load(asked) if engine in engine_kinds() else None
    if said is not None:
        form_sp, form, notes = said
        return spelt(form_sp, engine, form, notes)
    # no load-dependent form for this engine or release: the lowest band's k (`k_schedule` says where it ends)
    return spelt(first, engine, "lowest band", ())
