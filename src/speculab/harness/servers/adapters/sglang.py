"""SGLang: `--speculative-algorithm NGRAM | STANDALONE | EAGLE | EAGLE3 | NEXTN | DFLASH | DSPARK | ...` and its
`--speculative-*` companions (k as each algorithm counts it; `options` as more `--speculative-*` flags).

Acceptance: gauges `sglang:spec_accept_length` / `sglang:spec_accept_rate` (a recent-window average, not a counter),
and per response (`read_response`):

* with `return_spec_tokens_details: true` in the request (`request_fields`): `sglext.spec_tokens_details`
  {spec_verify_ct, spec_num_correct_drafts, spec_num_proposed_drafts, spec_accept_rate, spec_accept_length,
  histograms} at the body's top level, or streamed in a chunk of its own (`choices: []`) before the usage chunk
  (sglang/srt/entrypoints/openai/utils.py `spec_tokens_details_from_meta_info`, serving_chat.py); a list when n > 1.
  SGLang writes 0 for a count it lacks: drafts proposed 0 with some accepted is dropped (`client.response.consistent`).
* `meta_info` {spec_verify_ct, spec_num_correct_drafts | spec_accepted_drafts | spec_accept_token_num,
  spec_num_proposed_drafts | spec_proposed_drafts | spec_draft_token_num} on the choice (non-streamed chat with
  `return_meta_info: true`) or at the top level (native /generate).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from speculab.config import KNOWN_METHODS, SpeculationConfig
from speculab.errors import UserError
from speculab.harness.records import ResponseReading
from speculab.harness.servers.adapters.base import (
    AcceptanceMetrics,
    CacheReset,
    EngineAdapter,
    KnownMethods,
    PrefixCacheMetrics,
    PythonRelease,
    checked_scalars,
    object_at,
    unsupported,
)
from speculab.harness.servers.adapters.flags import parse_command
from speculab.harness.servers.adapters.options import flatten, option_flags
from speculab.harness.servers.adapters.vllm import NGRAM_GRID
from speculab.protocol.chunks import EngineFields, as_count

KIND = "sglang"
_CUDA_NOTE = "SGLang's n-gram speculation needs CUDA; on a CPU build use an EAGLE head or a draft model"
# From the sglang 0.5.23 wheel's source (`pip download --no-deps`, read with methods.declared's readers, never
# installed).
_KNOWN = KnownMethods(
    "sglang 0.5.23 (the PyPI wheel's source, not installed here)",
    "sglang/srt/speculative/spec_info.py SpeculativeAlgorithm + spec_registry.py _RESERVED_ALIASES",
    ("DFLASH", "UNO", "DSPARK", "EAGLE", "EAGLE3", "FROZEN_KV_MTP", "STANDALONE", "NGRAM", "NEXTN"),
)
_RELEASE = PythonRelease(
    KIND,
    (KIND,),
    # before 0.5.23: argparse choices in server_args.py; 0.5.23: a free string checked against the
    # SpeculativeAlgorithm enum, plus its reserved aliases (NEXTN)
    (
        ("srt/server_args.py", "--speculative-algorithm"),
        ("srt/speculative/spec_info.py", "enum SpeculativeAlgorithm"),
        ("srt/speculative/spec_registry.py", "_RESERVED_ALIASES"),
    ),
    (("srt/server_args.py", "flags --speculative-"), ("srt/arg_groups/fields/spec.py", "flags Spec")),
)


def _candidate(adapter: EngineAdapter, baseline_cmd: Sequence[str], speculation: SpeculationConfig) -> list[str]:
    algo = _ALGORITHMS.get(speculation.method, speculation.method)
    if speculation.method in KNOWN_METHODS and speculation.method not in _ALGORITHMS:
        raise unsupported(
            adapter.kind, speculation, "ngram, draft_model, eagle, eagle3, or a --speculative-algorithm name"
        )
    if speculation.model is None and algo in _NEEDS_PATH:
        raise UserError(f"speculation.method {speculation.method} needs `model` (the draft model's or head's path)")
    owned, derived = _derived(algo, speculation)
    extra, left = option_flags(speculation.options, "--speculative-", owned, derived)
    return [*baseline_cmd, "--speculative-algorithm", algo, *flatten(left), *extra, *speculation.engine_args]


def _launch(model: str, port: int, context: int | None) -> list[str] | None:
    return ["python", "-m", "sglang.launch_server", "--model-path", model, "--port", str(port)]


# speculab's experiment names -> SGLang's algorithm names
_ALGORITHMS = {"ngram": "NGRAM", "draft_model": "STANDALONE", "eagle": "EAGLE", "eagle3": "EAGLE3"}
_NEEDS_PATH = frozenset({"STANDALONE", "EAGLE", "EAGLE3", "DFLASH"})


def _derived(algo: str, speculation: SpeculationConfig) -> tuple[dict[str, str], dict[str, list[str]]]:
    """The flags the entry's own keys set (flag -> key) and every flag speculab derives for `algo` (flag -> values),
    companions an option may replace included. SGLang counts verified positions including the root: k drafts are a
    verify window of k + 1 (`--speculative-num-draft-tokens`), except for NGRAM, whose k is that count itself."""
    k = speculation.num_speculative_tokens
    owned = {"--speculative-algorithm": "method"}
    derived: dict[str, list[str]] = {}
    if speculation.model is not None:
        derived["--speculative-draft-model-path"] = [str(speculation.model)]
        owned["--speculative-draft-model-path"] = "model"
    if algo == "NGRAM":
        derived["--speculative-num-draft-tokens"] = [str(k)]
        owned["--speculative-num-draft-tokens"] = "num_speculative_tokens"
        # releases before 0.5.23 only (it has no window-size flags; the plan-time check says so)
        for key, flag in (
            ("prompt_lookup_max", "--speculative-ngram-max-match-window-size"),
            ("prompt_lookup_min", "--speculative-ngram-min-match-window-size"),
        ):
            if getattr(speculation, key) is not None:
                derived[flag] = [str(getattr(speculation, key))]
                owned[flag] = key
    elif algo == "DFLASH":  # one parallel block: no steps, no top-k (SGLang forces both to 1)
        derived["--speculative-num-draft-tokens"] = [str(k + 1)]
        owned["--speculative-num-draft-tokens"] = "num_speculative_tokens"
    elif algo == "DSPARK":  # gamma = k drafted tokens; SGLang sets the verify window to gamma + 1 itself
        derived["--speculative-dspark-block-size"] = [str(k)]
        owned["--speculative-dspark-block-size"] = "num_speculative_tokens"
    else:  # EAGLE, EAGLE3, STANDALONE, NEXTN, FROZEN_KV_MTP, a registered name: a chain (top-k 1) of k draft steps
        derived["--speculative-num-steps"] = [str(k)]
        owned["--speculative-num-steps"] = "num_speculative_tokens"
        derived["--speculative-eagle-topk"] = ["1"]
        derived["--speculative-num-draft-tokens"] = [str(k + 1)]
    return owned, derived


# --- what its responses say: `sglext.spec_tokens_details`, `meta_info` ---------------------------------------------

SOURCE_DETAILS = "sglang sglext.spec_tokens_details"
SOURCE_META = "sglang meta_info"
# SGLang renamed these; every spelling seen in its tokenizer manager, newest first.
_ACCEPTED = ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
_DRAFTED = ("spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")
# meta_info scalars worth keeping in a record (it can also carry per-token logprobs: those are left out)
META_KEPT = ("spec_verify_ct", *_ACCEPTED, *_DRAFTED, "completion_tokens", "cached_tokens")


def _read_response(said: EngineFields) -> ResponseReading | None:
    """Its asked-for `spec_tokens_details` before the `meta_info` a native response carries; the record keeps the
    meta_info scalars about speculation and the prefix cache, and the details (its accept rate and length as the
    server computed them, beside the counts; its histograms, lists, listed as dropped)."""
    details = _details(object_at(said.top, "sglext"))
    meta = object_at(said.choice, "meta_info") or object_at(said.top, "meta_info")
    kept: dict[str, Any] = {}
    meta_kept = {k: meta[k] for k in META_KEPT if k in meta} if meta else {}
    if meta_kept:
        kept["meta_info"] = checked_scalars(meta_kept)
    if details is not None:
        kept["spec_tokens_details"] = checked_scalars(details)
    spec = _counts(details, SOURCE_DETAILS, ("spec_num_correct_drafts",), ("spec_num_proposed_drafts",))
    spec = spec or _counts(meta, SOURCE_META, _ACCEPTED, _DRAFTED)
    return ResponseReading(spec, kept) if spec is not None or kept else None


def _details(ext: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """`sglext.spec_tokens_details`: one object per request, a list of them when n > 1 (the first: the harness asks
    for one choice)."""
    details = ext.get("spec_tokens_details") if ext is not None else None
    if isinstance(details, list):
        details = details[0] if details else None
    return details if isinstance(details, Mapping) else None


def _counts(
    fields: Mapping[str, Any] | None, source: str, accepted: tuple[str, ...], drafted: tuple[str, ...]
) -> dict[str, Any] | None:
    """Verify steps, drafts proposed and correct (vLLM's semantics: tokens drafted and accepted), the first spelling
    that holds a count; None without a step count."""
    if not fields or as_count(fields.get("spec_verify_ct")) is None:
        return None
    return {
        "drafts": as_count(fields.get("spec_verify_ct")),
        "draft_tokens": _first(fields, drafted),
        "accepted_tokens": _first(fields, accepted),
        "source": source,
    }


def _first(fields: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    return next((as_count(fields[k]) for k in keys if as_count(fields.get(k)) is not None), None)


SIMULATE_ACC_LEN = "SGLANG_SIMULATE_ACC_LEN"
SIMULATE_ACC_METHOD = "SGLANG_SIMULATE_ACC_METHOD"


def _forced_launch(command: Sequence[str], env: Mapping[str, str]) -> tuple[str, ...]:
    """`SGLANG_SIMULATE_ACC_LEN` set to a positive acceptance length, in the environment or as an `env NAME=VALUE`
    word of the command: SGLang then accepts drafts to that mean length, whatever the content (0 or below: off)."""
    words = dict(w.split("=", 1) for w in command if "=" in w and not w.startswith("-"))
    value = env.get(SIMULATE_ACC_LEN, words.get(SIMULATE_ACC_LEN))
    try:
        forced = value is not None and float(value) > 0
    except ValueError:
        forced = False  # SGLang refuses a value that is not a number: no run, nothing forced
    return (f"{SIMULATE_ACC_LEN}={value}",) if forced else ()


def _force_acceptance(spec: SpeculationConfig, rates: tuple[float, ...]) -> SpeculationConfig:
    """SGLang's simulated acceptance, in the candidate server's environment (SGLang has no flag for it).

    `SGLANG_SIMULATE_ACC_LEN` is an acceptance length counted with the bonus token: each verify step commits that
    many tokens, `num_correct_drafts = length - 1` accepted drafts, clamped to [1, steps + 1] (1.0: the bonus token
    only; 0 or below: off) (sglang/srt/speculative/eagle_utils.py `generate_simulated_accept_index`,
    `_sample_simulated_acc_len`; environ.py). The canon's length for k from the unconditional per-position rates is
    the same quantity, 1 + p_0 + ... + p_(k-1) (docs/predict.md), so that is what is set, for the candidate's K. SGLang
    draws one length per step for the whole batch, not a draft per position per request: the mean matches, the
    per-position shape does not, which a cost probe does not need (its step time depends on the tokens verified and
    committed). `SGLANG_SIMULATE_ACC_METHOD=match-expected` makes that mean the length asked: the older default,
    `multinomial`, rounds a normal draw around it, clamped, whose mean drifts from it near the ends."""
    k = spec.num_speculative_tokens
    length = 1.0 + sum(float(r) for r in rates[:k])
    forced = {SIMULATE_ACC_LEN: f"{length:.6g}", SIMULATE_ACC_METHOD: "match-expected"}
    return replace(spec, env={**spec.env, **forced})


# SGLang's acceptance thresholds (server_args): 1.0, the default, is exact rejection sampling; below it a draft is
# accepted when the target's probability of it exceeds `single`, or with probability min(1, p / `acc`)
ACCEPT_THRESHOLDS = ("--speculative-accept-threshold-single", "--speculative-accept-threshold-acc")


def _lossy_launch(command: Sequence[str]) -> tuple[str, ...]:
    """An acceptance threshold below 1 (`--speculative-accept-threshold-single` or `-acc`): drafts accepted that the
    target would not always have sampled."""
    said = []
    for flag, values in parse_command(command).flags.items():
        if flag.replace("_", "-") not in ACCEPT_THRESHOLDS:
            continue
        for v in values:
            try:
                lossy = v is not None and float(v) < 1
            except ValueError:
                lossy = False  # SGLang refuses a value that is not a number: no run
            said += [f"{flag} {v}"] if lossy else []
    return tuple(said)


ADAPTER = EngineAdapter(
    kind=KIND,
    metric_prefix="sglang:",
    executable="python3",
    acceptance=AcceptanceMetrics(
        kind="gauges",
        accept_length_gauge="sglang:spec_accept_length",
        accept_rate_gauge="sglang:spec_accept_rate",
        response_fields={
            "verify_steps": "meta_info.spec_verify_ct",
            "tokens": "meta_info.completion_tokens",
            # asked with return_spec_tokens_details (request_fields): the counts themselves
            "drafts": "sglext.spec_tokens_details.spec_verify_ct",
            "draft_tokens": "sglext.spec_tokens_details.spec_num_proposed_drafts",
            "accepted_tokens": "sglext.spec_tokens_details.spec_num_correct_drafts",
        },
    ),
    # cached prompt tokens / all prompt tokens (names from SGLang's metrics tests; not seen from a server here)
    prefix_cache=PrefixCacheMetrics("sglang:cached_tokens_total", "sglang:prompt_tokens_total"),
    kv_usage_gauges=("sglang:token_usage",),
    latency_histograms=True,
    # /flush_cache empties the radix (prefix) cache; SGLang refuses it while requests run (between blocks none do)
    cache_reset=CacheReset(("/flush_cache",)),
    # each response then carries `sglext.spec_tokens_details` (streamed: a chunk of its own before usage)
    request_fields={"return_spec_tokens_details": True},
    speculation_flags=frozenset({"--speculative-algo"}),  # short alias seen in older scripts
    speculation_prefixes=("--speculative-",),
    context_flags=("--context-length",),
    starter_grid=(
        f"  # {_CUDA_NOTE}\n{NGRAM_GRID}"
        "  # - {method: eagle, num_speculative_tokens: 4, model: /path/to/eagle-head}   # or eagle3, draft_model\n"
    ),
    starter_note=_CUDA_NOTE,
    ngram_lookup=True,
    experiment_names={v: k for k, v in _ALGORITHMS.items()},
    # it renamed its n-gram window flags away in 0.5.23: an entry that sets them is checked as options are
    lookup_keys_checked=True,
    declares=_RELEASE,
    known_methods=_KNOWN,
    candidate=_candidate,
    launch=_launch,
    forced_launch=_forced_launch,
    force_acceptance=_force_acceptance,
    read_response=_read_response,
    lossy_launch=_lossy_launch,
)
