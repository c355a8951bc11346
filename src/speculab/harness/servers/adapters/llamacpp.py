"""llama.cpp `llama-server`: a draft model with `--spec-type draft-simple --spec-draft-model PATH --spec-draft-n-max K`;
n-gram lookup with `--spec-type ngram-simple --spec-ngram-simple-size-m K [--spec-ngram-simple-size-n N]`.

Checked against the build `scripts/install_llama_server.sh` makes (llama.cpp as vendored in llama-cpp-python
0.3.36): the `--spec-*` names are canonical there and `-md`, `--model-draft`, `-td`, `-ctkd`, ... are their aliases;
the old `--draft-max`/`--draft`/`--draft-n` and `--draft-min` are removed (the server refuses them). Acceptance: with
`--metrics`, counters `llamacpp:spec_decode_num_drafts_total` (verification steps), `..._num_draft_tokens_total`,
`..._num_accepted_tokens_total` and `..._num_accepted_tokens_per_pos_total{position}`, with vLLM's semantics; per
response `timings.draft_n` and `timings.draft_n_accepted` (tokens only: no step count per request; present only when
the request drafted), summed over a window when /metrics is off (`window_acceptance`).

Any other `--spec-type` of the build (`ngram-map-k`, `draft-eagle3`, ...) takes k through the flag that build reads
for that type, `model` as `--spec-draft-model`, and `options` as `--spec-*` flags (adapters.options)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from speculab.config import KNOWN_METHODS, SpeculationConfig
from speculab.errors import UserError
from speculab.harness.analysis.acceptance import acceptance_length, acceptance_rate
from speculab.harness.records import AcceptanceSummary, RequestRecord, ResponseReading
from speculab.harness.servers.adapters.base import (
    EngineAdapter,
    HelpRelease,
    KnownMethods,
    PrefixCacheMetrics,
    checked_scalars,
    object_at,
    unsupported,
)
from speculab.harness.servers.adapters.options import flatten, option_flags
from speculab.harness.servers.adapters.vllm import counters
from speculab.protocol.chunks import EngineFields, as_count

KIND = "llamacpp"

# Every spelling of a speculation option -> the name the built version prints first (common/arg.cpp). Old builds'
# names map to the same option, so a diff between an old-style and a new-style command is still exact.
_ALIASES = {
    "-md": "--spec-draft-model",
    "--model-draft": "--spec-draft-model",
    "-hfd": "--spec-draft-hf",
    "-hfrd": "--spec-draft-hf",
    "--hf-repo-draft": "--spec-draft-hf",
    "-td": "--spec-draft-threads",
    "--threads-draft": "--spec-draft-threads",
    "-tbd": "--spec-draft-threads-batch",
    "--threads-batch-draft": "--spec-draft-threads-batch",
    "-Cd": "--spec-draft-cpu-mask",
    "--cpu-mask-draft": "--spec-draft-cpu-mask",
    "-Cbd": "--spec-draft-cpu-mask-batch",
    "--cpu-mask-batch-draft": "--spec-draft-cpu-mask-batch",
    "-Crd": "--spec-draft-cpu-range",
    "--cpu-range-draft": "--spec-draft-cpu-range",
    "-Crbd": "--spec-draft-cpu-range-batch",
    "--cpu-range-batch-draft": "--spec-draft-cpu-range-batch",
    "--cpu-strict-draft": "--spec-draft-cpu-strict",
    "--cpu-strict-batch-draft": "--spec-draft-cpu-strict-batch",
    "--prio-draft": "--spec-draft-prio",
    "--prio-batch-draft": "--spec-draft-prio-batch",
    "--poll-draft": "--spec-draft-poll",
    "--poll-batch-draft": "--spec-draft-poll-batch",
    "-ctkd": "--spec-draft-type-k",
    "--cache-type-k-draft": "--spec-draft-type-k",
    "-ctvd": "--spec-draft-type-v",
    "--cache-type-v-draft": "--spec-draft-type-v",
    "-otd": "--spec-draft-override-tensor",
    "--override-tensor-draft": "--spec-draft-override-tensor",
    "-cmoed": "--spec-draft-cpu-moe",
    "--cpu-moe-draft": "--spec-draft-cpu-moe",
    "--spec-draft-ncmoe": "--spec-draft-n-cpu-moe",
    "-ncmoed": "--spec-draft-n-cpu-moe",
    "--n-cpu-moe-draft": "--spec-draft-n-cpu-moe",
    "--draft-p-min": "--spec-draft-p-min",
    "--draft-p-split": "--spec-draft-p-split",
    "-devd": "--spec-draft-device",
    "--device-draft": "--spec-draft-device",
    "-ngld": "--spec-draft-ngl",
    "--gpu-layers-draft": "--spec-draft-ngl",
    "--n-gpu-layers-draft": "--spec-draft-ngl",
    # removed in the built version (it refuses them), kept so an older baseline's speculation is still recognized
    "--draft": "--spec-draft-n-max",
    "--draft-n": "--spec-draft-n-max",
    "--draft-max": "--spec-draft-n-max",
    "--draft-n-min": "--spec-draft-n-min",
    "--draft-min": "--spec-draft-n-min",
    "-cd": "--ctx-size-draft",  # older builds only
    "-lcs": "--lookup-cache-static",
    "-lcd": "--lookup-cache-dynamic",
}


def _candidate(adapter: EngineAdapter, baseline_cmd: Sequence[str], speculation: SpeculationConfig) -> list[str]:
    spec_type = _SPEC_TYPES.get(speculation.method, speculation.method)
    if speculation.method in KNOWN_METHODS and speculation.method not in _SPEC_TYPES:
        raise unsupported(adapter.kind, speculation, "draft_model, ngram, or a --spec-type name")
    owned = {"--spec-type": "method"}
    derived: dict[str, list[str]] = {}
    if speculation.model is None and spec_type == "draft-simple":
        raise UserError(f"speculation.method {speculation.method} needs `model` (the draft model's path)")
    if speculation.model is not None:
        derived["--spec-draft-model"] = [str(speculation.model)]
        owned["--spec-draft-model"] = "model"
    k_flag = _k_flag(spec_type, speculation.num_speculative_tokens)
    if k_flag is not None:
        derived[k_flag] = [str(speculation.num_speculative_tokens)]
        owned[k_flag] = "num_speculative_tokens"
    if speculation.prompt_lookup_max is not None:  # ngram: the n-gram matched in the context (size N)
        derived["--spec-ngram-simple-size-n"] = [str(speculation.prompt_lookup_max)]
        owned["--spec-ngram-simple-size-n"] = "prompt_lookup_max"
    extra, left = option_flags(speculation.options, "--spec-", owned, derived)
    return [*baseline_cmd, "--spec-type", spec_type, *flatten(left), *extra, *speculation.engine_args]


def _launch(model: str, port: int, context: int | None) -> list[str] | None:
    # --metrics: llama.cpp's acceptance and prompt-cache counters (without it, only per-response timings)
    return ["llama-server", "-m", model, "--port", str(port), "--metrics"]


# speculab's experiment names -> llama.cpp's --spec-type (`draft` is the name builds before --spec-type declare)
_SPEC_TYPES = {"draft_model": "draft-simple", "ngram": "ngram-simple", "draft": "draft-simple"}
# The flag that sets k for each --spec-type, as common_speculative_n_max (common/speculative.cpp) reads it; every
# `draft-*` type drafts up to --spec-draft-n-max. ngram-cache drafts a fixed 8 (no flag sets it).
_K_FLAGS = {
    "ngram-simple": "--spec-ngram-simple-size-m",
    "ngram-map-k": "--spec-ngram-map-k-size-m",
    "ngram-map-k4v": "--spec-ngram-map-k4v-size-m",
    "ngram-mod": "--spec-ngram-mod-n-max",
}
NGRAM_CACHE_K = 8


def _k_flag(spec_type: str, k: int) -> str | None:
    """The flag that carries k for `spec_type`; a type whose k no flag sets is refused unless k is what it drafts."""
    if spec_type.startswith("draft"):
        return "--spec-draft-n-max"
    if spec_type in _K_FLAGS:
        return _K_FLAGS[spec_type]
    if spec_type == "ngram-cache":
        if k != NGRAM_CACHE_K:
            raise UserError(
                f"speculation: llama.cpp's ngram-cache drafts a fixed {NGRAM_CACHE_K} tokens (common/speculative.cpp); "
                f"set num_speculative_tokens: {NGRAM_CACHE_K}"
            )
        return None
    raise UserError(
        f"speculation.method {spec_type}: speculab does not know which llama.cpp flag sets k for it (known: "
        f"draft-*, {', '.join(_K_FLAGS)}, ngram-cache); give candidate.command whole"
    )


# --- what a build says about itself: `llama-server --help` and `--version` ------------------------------------------

# Read from the build scripts/install_llama_server.sh makes.
# fmt: off
_KNOWN = KnownMethods(
    "llama.cpp of llama-cpp-python 0.3.36 (0.5.0-dev, build 1, commit 0c1e570)",
    "llama-server --help --spec-type",
    ("draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark", "ngram-simple", "ngram-map-k",
     "ngram-map-k4v", "ngram-mod", "ngram-cache",),
)
# fmt: on
_SPEC_TYPE = re.compile(r"--spec-type\s+([a-z0-9][a-z0-9,_-]*)")
_FLAG = re.compile(r"(?<![\w-])(--(?:spec|no-spec|draft)-[a-z0-9-]+)")


def methods_from_help(text: str) -> tuple[str, ...]:
    """`llama-server --help`: the `--spec-type` value list (`none,draft-simple,...`), less `none`. A build from
    before `--spec-type` that has `--model-draft`/`-md` declares only a draft model: `draft`."""
    m = _SPEC_TYPE.search(text)
    if m:
        return tuple(t for t in m.group(1).split(",") if t and t != "none")
    if re.search(r"(^|\s)(-md|--model-draft)\b", text):
        return ("draft",)
    return ()


def version(text: str) -> str | None:
    """`llama-server --version` writes `version: 1 (0c1e570)` (llama_print_build_info); the part after `version:`."""
    m = re.search(r"^version:\s*(.+?)\s*$", text, re.MULTILINE)
    return m.group(1) if m else None


def spec_flags(text: str) -> tuple[str, ...]:
    """`llama-server --help`: every speculation flag the build has (`--spec-*`, `--no-spec-*`, older `--draft-*`)."""
    return tuple(dict.fromkeys(_FLAG.findall(text)))


# --- what its responses say: `timings` ------------------------------------------------------------------------------

SOURCE = "llama.cpp timings"


def _read_response(said: EngineFields) -> ResponseReading | None:
    """Its `timings`, kept as checked scalars (draft counts, and `cache_n`: its prefix-cache hit); the draft counts
    only when the request drafted something. It reports no verification steps per request (its /metrics counter has
    them server-wide): `drafts` is None."""
    timings = object_at(said.top, "timings")
    if timings is None:
        return None
    kept = {"timings": checked_scalars(timings)}
    if "draft_n" not in timings:
        return ResponseReading(None, kept)
    spec = {
        "drafts": None,
        "draft_tokens": as_count(timings.get("draft_n")),
        "accepted_tokens": as_count(timings.get("draft_n_accepted")),
        "source": SOURCE,
    }
    return ResponseReading(spec, kept)


def from_timings(timings: Iterable[Mapping[str, Any]], k: int | None = None) -> AcceptanceSummary:
    """Sum `timings.draft_n` / `draft_n_accepted` over responses. Exact rate; the length needs the step count,
    which llama.cpp does not report, so it is estimated as if every draft had k tokens (flagged approximate)."""
    drafted = accepted = 0.0
    for t in timings:
        drafted += float(t.get("draft_n") or 0)
        accepted += float(t.get("draft_n_accepted") or 0)
    source = "llama.cpp per-response timings"
    if drafted <= 0:
        return AcceptanceSummary(source, False, None, drafted, accepted)
    drafts = drafted / k if k else None
    length = acceptance_length(accepted, drafts)
    return AcceptanceSummary(
        source, True, drafts, drafted, accepted, acceptance_rate(accepted, drafted), length, (), k is not None
    )


def _window_acceptance(records: Sequence[RequestRecord], k: int | None) -> AcceptanceSummary | None:
    """A window's acceptance from its records' timings (llama-server without `--metrics`); None: none drafted."""
    timings = [r.extra["timings"] for r in records if isinstance(r.extra.get("timings"), dict)]
    return from_timings(timings, k) if any("draft_n" in t for t in timings) else None


ADAPTER = EngineAdapter(
    kind=KIND,
    executable="llama-server",
    # tools/server/server.cpp: "couldn't bind HTTP server socket, hostname: H, port: P" (no errno said)
    port_taken_signs=("couldn't bind http server socket",),
    metric_prefix="llamacpp:",
    acceptance=counters(KIND, draft_tokens="timings.draft_n", accepted_tokens="timings.draft_n_accepted"),
    # prompt tokens reused from a slot's cache / processed (excluding the reused): counters with --metrics
    prefix_cache=PrefixCacheMetrics("llamacpp:prompt_tokens_cached_total", misses="llamacpp:prompt_tokens_total"),
    # llama-server erases one slot at a time (POST /slots/ID?action=erase), not its whole cache: no cache_reset.
    # It advertises keep-alive but closes the connection after every streamed response (its chunked content
    # provider reports the end of the stream as a failure to cpp-httplib); measured on the build we test: reusing
    # those connections fails about one request in four as "server disconnected".
    keep_alive=False,
    # `--spec-*` (every option of the built version) and `--draft-*` (older builds) by prefix; these exactly:
    speculation_flags=frozenset(
        {"--ctx-size-draft", "--hf-file-draft", "--lookup-cache-static", "--lookup-cache-dynamic"}
    ),
    speculation_prefixes=("--draft-", "--spec-", "--no-spec-"),
    aliases=_ALIASES,
    # no context flag: --ctx-size is split over its --parallel slots, not one request's context
    starter_grid=(
        "  - {method: ngram, num_speculative_tokens: 2}    # --spec-type ngram-simple\n"
        "  - {method: ngram, num_speculative_tokens: 4}\n"
        "  # - {method: draft_model, num_speculative_tokens: 8, model: /path/to/draft.gguf}   # a GGUF draft model\n"
    ),
    experiment_names={"ngram-simple": "ngram", "draft-simple": "draft_model", "draft": "draft_model"},
    fixed_k={"ngram-cache": NGRAM_CACHE_K},
    draft_vocab_prefix="llama.cpp accepts up to 128",
    declares=HelpRelease(methods_from_help, lambda text, _methods: spec_flags(text), version),
    known_methods=_KNOWN,
    candidate=_candidate,
    launch=_launch,
    read_response=_read_response,
    window_acceptance=_window_acceptance,
)
