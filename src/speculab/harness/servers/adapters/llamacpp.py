"""llama.cpp `llama-server`: a draft model with `--model-draft PATH --draft-max K [--draft-min N]`; n-gram lookup
with `--spec-type ngram-simple` (builds from late 2025 on). Acceptance per response: `timings.draft_n` and
`timings.draft_n_accepted` (totals, no per-position breakdown)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from speculab.config import SpeculationConfig
from speculab.harness.servers.adapters.base import AcceptanceMetrics, refuse_if_speculating, unsupported

_ALIASES = {
    "-md": "--model-draft",
    "--draft": "--draft-max",
    "--draft-n": "--draft-max",
    "--draft-n-min": "--draft-min",
    "-ngld": "--gpu-layers-draft",
    "--n-gpu-layers-draft": "--gpu-layers-draft",
    "-cd": "--ctx-size-draft",
    "-devd": "--device-draft",
    "-td": "--threads-draft",
    "-tbd": "--threads-batch-draft",
    "-ctkd": "--cache-type-k-draft",
    "-ctvd": "--cache-type-v-draft",
    "-hfd": "--hf-repo-draft",
    "-hfrd": "--hf-repo-draft",
    "-lcs": "--lookup-cache-static",
    "-lcd": "--lookup-cache-dynamic",
}


@dataclass(frozen=True, slots=True)
class LlamacppAdapter:
    kind: str = "llamacpp"
    health_path: str = "/health"
    acceptance: AcceptanceMetrics = field(
        default_factory=lambda: AcceptanceMetrics(
            kind="per_response",
            response_fields={"draft_tokens": "timings.draft_n", "accepted_tokens": "timings.draft_n_accepted"},
        )
    )
    speculation_flags: frozenset[str] = frozenset(
        {
            "--model-draft",
            "--gpu-layers-draft",
            "--ctx-size-draft",
            "--device-draft",
            "--threads-draft",
            "--threads-batch-draft",
            "--cache-type-k-draft",
            "--cache-type-v-draft",
            "--hf-repo-draft",
            "--hf-file-draft",
            "--lookup-cache-static",
            "--lookup-cache-dynamic",
        }
    )
    speculation_prefixes: tuple[str, ...] = ("--draft-", "--spec-")
    aliases: dict[str, str] = field(default_factory=lambda: dict(_ALIASES))

    def candidate_command(self, baseline_cmd: Sequence[str], spec: SpeculationConfig) -> list[str]:
        refuse_if_speculating(self, baseline_cmd)
        k = str(spec.num_speculative_tokens)
        if spec.method == "draft_model":
            extra = ["--model-draft", str(spec.model), "--draft-max", k]
        elif spec.method == "ngram":
            extra = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-m", k]
            if spec.prompt_lookup_max is not None:
                extra += ["--spec-ngram-simple-size-n", str(spec.prompt_lookup_max)]
        else:
            raise unsupported(self.kind, spec, "draft_model, ngram")
        return [*baseline_cmd, *extra, *spec.engine_args]
