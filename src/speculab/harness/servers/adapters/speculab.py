"""speculab's own engine: the same `--speculative-config` JSON and counter semantics as vLLM, prefix `speculab:`; every
response with speculation carries its own counts in `usage.speculab_spec_decode` {drafts, draft_tokens,
accepted_tokens}."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace

from speculab.config import SpeculationConfig
from speculab.harness.records import ResponseReading
from speculab.harness.servers.adapters.base import ByLoad, CacheReset, EngineAdapter, PythonRelease, object_at
from speculab.harness.servers.adapters.flags import parse_command
from speculab.harness.servers.adapters.vllm import DRAFT_LINE, NGRAM_GRID, counters, json_candidate, max_model_len
from speculab.protocol.chunks import EngineFields, as_count

KIND = "speculab"
_RELEASE = PythonRelease(
    KIND,
    (KIND,),
    (("engine/speculative/config.py", "METHODS"),),
    (("engine/speculative/config.py", "values _KEYS"),),
)


def serve_command(python: str, model: str, port: int) -> list[str]:
    """`python -m speculab serve MODEL --port PORT` with the given interpreter (`speculab init`, `speculab demo`)."""
    return [python, "-m", "speculab", "serve", model, "--port", str(port)]


def _launch(model: str, port: int, context: int | None) -> list[str] | None:
    return [*serve_command("python", model, port), *max_model_len(context)]


def _by_load(b: ByLoad) -> tuple[SpeculationConfig, str, tuple[str, ...]] | None:
    """Drafts off above the lowest band's edge: for off-above, and for a per-load k too, since this engine keys no k
    on the batch size. Its `adaptive: true` (k picked per step) is a policy the run did not measure, so it is not
    shipped in place of the measured k: on the demo engine it re-verified slower than the fixed k it stood for
    (docs/recommendation.md, "Limits"). Above the edge the steps are plain decoding."""
    sp = replace(b.first, options={**b.first.options, "disable_by_batch_size": b.off_above})
    notes = (f"drafts off in steps with more than {b.off_above} decode rows",)
    if b.form == "off-above":
        return sp, "off-above", notes
    why = "speculab's engine keys no k on the batch size: the lowest band's k as measured, plain decoding above"
    return sp, "off-above (per-load)", (*notes, why)


SOURCE = "speculab usage.speculab_spec_decode"


def _read_response(said: EngineFields) -> ResponseReading | None:
    """Its usage's `speculab_spec_decode`, in the record's own shape (the engine was written to it), with
    `"forced": true` where the engine accepted the drafts by a draw (`--forced-acceptance-rates`)."""
    ours = object_at(said.usage or {}, "speculab_spec_decode")
    if ours is None:
        return None
    counts: dict[str, object] = {key: as_count(ours.get(key)) for key in ("drafts", "draft_tokens", "accepted_tokens")}
    per_pos = ours.get("accepted_per_position")
    if isinstance(per_pos, list) and all(as_count(p) is not None for p in per_pos):
        counts["accepted_per_position"] = [as_count(p) for p in per_pos]  # a position's count, for intervals
    forced = {"forced": True} if ours.get("forced") is True else {}
    return ResponseReading({**counts, "source": SOURCE, **forced})


FORCED_FLAG = "--forced-acceptance-rates"


def _forced_launch(command: Sequence[str], env: Mapping[str, str]) -> tuple[str, ...]:
    """`--forced-acceptance-rates R1,R2,...`, of `speculab serve` and of `speculab mock-server` alike: drafts
    accepted by a seeded draw to those rates, not by rejection sampling (a cost probe)."""
    rates = parse_command(command).flags.get(FORCED_FLAG)
    if not rates:
        return ()
    return (f"{FORCED_FLAG} {rates[-1]}" if rates[-1] is not None else FORCED_FLAG,)


def _force_acceptance(spec: SpeculationConfig, rates: tuple[float, ...]) -> SpeculationConfig:
    """The reference engine's `--forced-acceptance-rates`, appended to the candidate's flags."""
    return replace(spec, engine_args=(*spec.engine_args, FORCED_FLAG, ",".join(f"{r:.6g}" for r in rates)))


ADAPTER = EngineAdapter(
    kind=KIND,
    executable=sys.executable,
    metric_prefix="speculab:",
    latency_histograms=True,
    acceptance=replace(
        counters(
            KIND,
            drafts="usage.speculab_spec_decode.drafts",
            draft_tokens="usage.speculab_spec_decode.draft_tokens",
            accepted_tokens="usage.speculab_spec_decode.accepted_tokens",
        ),
        steps_by_k=f"{KIND}:spec_decode_num_steps_total",
    ),
    cache_reset=CacheReset(("/reset_prefix_cache",)),
    kv_usage_gauges=("speculab:kv_cache_usage_perc",),
    speculation_flags=frozenset({"--speculative-config", FORCED_FLAG}),  # forcing: a cost probe's speculation
    context_flags=("--max-model-len",),
    starter_grid=(
        f"{NGRAM_GRID}{DRAFT_LINE}"
        "  # - {method: eagle, num_speculative_tokens: 4, model: /path/to/eagle-head}"
        "   # an EAGLE-1 head for the target\n"
    ),
    # vLLM's --speculative-config JSON dialect, as vLLM's adapter writes it
    ngram_lookup=True,
    json_config=True,
    candidate=json_candidate,
    declares=_RELEASE,
    server_lists_methods=True,  # its /version says `speculative_methods`
    says_config=True,  # its /version says speculative_config and server_args (engine/server/routes.py)
    launch=_launch,
    load_form=_by_load,
    read_response=_read_response,
    forced_launch=_forced_launch,
    force_acceptance=_force_acceptance,
    forced_gauge="speculab:spec_decode_forced_acceptance",  # 1 while --forced-acceptance-rates is set
)
