"""llama.cpp `llama-server`: a draft model with `--spec-type draft-simple --spec-draft-model PATH --spec-draft-n-max K`;
n-gram lookup with `--spec-type ngram-simple --spec-ngram-simple-size-m K [--spec-ngram-simple-size-n N]`.

Checked against the build `scripts/install_llama_server.sh` makes (llama.cpp as vendored in llama-cpp-python
0.3.36): the `--spec-*` names are canonical there and `-md`, `--model-draft`, `-td`, `-ctkd`, ... are their aliases;
the old `--draft-max`/`--draft`/`--draft-n` and `--draft-min` are removed (the server refuses them). Acceptance: with
`--metrics`, counters `llamacpp:spec_decode_num_drafts_total` (verification steps), `..._num_draft_tokens_total`,
`..._num_accepted_tokens_total` and `..._num_accepted_tokens_per_pos_total{position}`, with vLLM's semantics; per
response `timings.draft_n` and `timings.draft_n_accepted` (tokens only: no step count per request)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from speculab.config import KNOWN_METHODS, SpeculationConfig
from speculab.harness.servers.adapters.base import (
    AcceptanceMetrics,
    PrefixCacheMetrics,
    refuse_if_speculating,
    unsupported,
)
from speculab.harness.servers.adapters.vllm import counters

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


@dataclass(frozen=True, slots=True)
class LlamacppAdapter:
    kind: str = "llamacpp"
    health_path: str = "/health"
    acceptance: AcceptanceMetrics = field(
        default_factory=lambda: replace(
            counters("llamacpp"),
            response_fields={"draft_tokens": "timings.draft_n", "accepted_tokens": "timings.draft_n_accepted"},
        )
    )
    # llama-server advertises keep-alive but closes the connection after every streamed response (its chunked
    # content provider reports the end of the stream as a failure to cpp-httplib); measured on the build we test:
    # reusing those connections fails about one request in four as "server disconnected".
    keep_alive: bool = False
    # `--spec-*` (every option of the built version) and `--draft-*` (older builds) by prefix; these exactly:
    # prompt tokens reused from a slot's cache / processed (excluding the reused): counters with --metrics
    prefix_cache: PrefixCacheMetrics | None = field(
        default_factory=lambda: PrefixCacheMetrics(
            "llamacpp:prompt_tokens_cached_total", misses="llamacpp:prompt_tokens_total"
        )
    )
    speculation_flags: frozenset[str] = frozenset(
        {"--ctx-size-draft", "--hf-file-draft", "--lookup-cache-static", "--lookup-cache-dynamic"}
    )
    speculation_prefixes: tuple[str, ...] = ("--draft-", "--spec-", "--no-spec-")
    aliases: dict[str, str] = field(default_factory=lambda: dict(_ALIASES))

    def candidate_command(self, baseline_cmd: Sequence[str], spec: SpeculationConfig) -> list[str]:
        refuse_if_speculating(self, baseline_cmd)
        k = str(spec.num_speculative_tokens)
        if spec.method == "draft_model":
            extra = ["--spec-type", "draft-simple", "--spec-draft-model", str(spec.model), "--spec-draft-n-max", k]
        elif spec.method == "ngram":
            extra = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-m", k]
            if spec.prompt_lookup_max is not None:
                extra += ["--spec-ngram-simple-size-n", str(spec.prompt_lookup_max)]
        elif spec.method not in KNOWN_METHODS:
            # llama.cpp's own `--spec-type` name (`ngram-map-k`, `draft-eagle3`, ...), checked against the build's
            # --help when the run is planned; its other options come through engine_args
            extra = ["--spec-type", spec.method, *(["--spec-draft-model", str(spec.model)] if spec.model else [])]
        else:
            raise unsupported(self.kind, spec, "draft_model, ngram, or a --spec-type name")
        return [*baseline_cmd, *extra, *spec.engine_args]
