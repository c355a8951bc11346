"""Text Generation Inference: `--speculate N`, whose method the served checkpoint decides (TGI v3.3.7,
server/text_generation_server/models/__init__.py): Medusa when its config.json has `medusa_num_heads` (the base model
from `base_model_name_or_path`, N at most the head count), an MLP speculator when its `model_type` is
`mlp_speculator` (N at most `n_predict`), n-gram otherwise. TGI has no other speculation option.

Such a checkpoint speculates with all its heads when `--speculate` is not given, so its plain arm is
`--speculate 0`: a baseline with exactly that is plain, and the candidate replaces it. Medusa and MLP-speculator
candidates require it (speculab cannot see from the command whether the checkpoint ships heads, but the user who
names the method knows).

Acceptance: the Prometheus histogram `tgi_request_skipped_tokens` (speculated tokens accepted per request).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from speculab.config import SpeculationConfig
from speculab.errors import UserError
from speculab.harness.servers.adapters.base import (
    AcceptanceMetrics,
    EngineAdapter,
    HeadsFromTarget,
    HelpRelease,
    KnownMethods,
    stripped_release,
    unsupported,
)

KIND = "tgi"

METHODS = ("ngram", "medusa", "mlp_speculator")  # what `--speculate N` runs, by what the checkpoint ships
HEAD_METHODS = frozenset({"medusa", "mlp_speculator"})
# From its source at tag v3.3.7 (the launcher's --speculate, and the server's model loader, which picks Medusa /
# MLP-speculator / n-gram from the served checkpoint).
_KNOWN = KnownMethods(
    "TGI v3.3.7 (its source, not installed here)",
    "launcher/src/main.rs --speculate; server/text_generation_server/models/__init__.py",
    METHODS,
)


def methods_from_help(text: str) -> tuple[str, ...]:
    """`text-generation-launcher --help`: `--speculate` runs what the served checkpoint ships — Medusa heads, an MLP
    speculator — or n-gram speculation (TGI v3.3.7's server/text_generation_server/models/__init__.py); nothing
    else is selectable."""
    return METHODS if re.search(r"--speculate\b", text) else ()


def _help_flags(text: str, methods: tuple[str, ...]) -> tuple[str, ...]:
    return ("--speculate",) if methods else ()


def without_plain_speculate(baseline_cmd: Sequence[str]) -> tuple[list[str], bool]:
    """The baseline less its `--speculate 0` (either spelling), and whether it had one."""
    out: list[str] = []
    found = False
    i = 0
    while i < len(baseline_cmd):
        a = baseline_cmd[i]
        if a == "--speculate" and i + 1 < len(baseline_cmd) and baseline_cmd[i + 1] == "0":
            found, i = True, i + 2
            continue
        if a == "--speculate=0":
            found, i = True, i + 1
            continue
        out.append(a)
        i += 1
    return out, found


def _candidate(adapter: EngineAdapter, baseline_cmd: Sequence[str], speculation: SpeculationConfig) -> list[str]:
    base, plain = without_plain_speculate(baseline_cmd)
    if speculation.method not in METHODS:
        raise unsupported(adapter.kind, speculation, f"{', '.join(METHODS)} (all via --speculate)")
    if speculation.method in HEAD_METHODS and not plain:
        raise UserError(
            f"speculation.method {speculation.method} on TGI: add `--speculate 0` to baseline.launch.command (TGI "
            f"speculates with all the heads of a checkpoint that ships them unless told 0); serve the "
            f"{speculation.method} checkpoint itself as --model-id"
        )
    if speculation.options or speculation.model:
        key = "options" if speculation.options else "model"
        raise UserError(
            f"speculation.{key}: TGI takes no speculation options but --speculate N (the heads come from the "
            "served checkpoint, --model-id); remove it"
        )
    return [*base, "--speculate", str(speculation.num_speculative_tokens), *speculation.engine_args]


def _launch(model: str, port: int, context: int | None) -> list[str] | None:
    return ["text-generation-launcher", "--model-id", model, "--port", str(port)]


ADAPTER = EngineAdapter(
    kind=KIND,
    executable="text-generation-launcher",
    metric_prefix="tgi_",
    acceptance=AcceptanceMetrics(kind="histogram", accepted_tokens="tgi_request_skipped_tokens"),
    speculation_flags=frozenset({"--speculate"}),
    # a checkpoint that ships heads speculates with all of them unless told 0: that is its plain arm
    plain_values={"--speculate": "0"},
    context_flags=("--max-total-tokens",),
    starter_grid=(
        "  - {method: ngram, num_speculative_tokens: 2}    # TGI: --speculate k (n-gram, or Medusa heads)\n"
        "  - {method: ngram, num_speculative_tokens: 4}\n"
    ),
    experiment_names={"ngram": "ngram"},
    heads_from_target=HeadsFromTarget(HEAD_METHODS, "TGI", "--model-id", "--speculate"),
    declares=HelpRelease(methods_from_help, _help_flags, stripped_release),
    known_methods=_KNOWN,
    candidate=_candidate,
    launch=_launch,
)
