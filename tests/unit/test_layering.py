"""The layering docs/architecture.md promises, read from the source: no import cycle between packages, the report
presents the verdict without reaching below it, the harness never imports the report, torch or the engine."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import speculab

SRC = Path(speculab.__file__).parent


def _package(module: str) -> str:
    """speculab.harness.verdict.build -> speculab.harness.verdict; speculab.report.html.page -> speculab.report."""
    parts = module.split(".")
    return ".".join(parts[:3] if parts[:2] == ["speculab", "harness"] and len(parts) > 2 else parts[:2])


def _imports() -> dict[str, set[str]]:
    """Module -> the speculab modules (and top-level third-party names) it imports, lazily or not."""
    out: dict[str, set[str]] = defaultdict(set)
    for f in SRC.rglob("*.py"):
        parts = ("speculab", *f.relative_to(SRC).with_suffix("").parts)
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                out[module].add(node.module)
            elif isinstance(node, ast.Import):
                out[module].update(a.name for a in node.names)
    return out


def _package_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for module, targets in _imports().items():
        for t in targets:
            if t.startswith("speculab.") and _package(t) != _package(module):
                edges[_package(module)].add(_package(t))
    return edges


def test_no_import_cycle_between_packages():
    edges = _package_edges()
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            assert state.get(nxt) != 1, "import cycle: " + " -> ".join([*path, node, nxt])
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for pkg in sorted(edges):
        if pkg not in state:
            visit(pkg, [])


def test_the_report_reads_the_verdict_not_what_lies_below_it():
    below = (
        "analysis",
        "load",
        "servers",
        "workload",
        "client",
        "run",
        "compare",
        "init",
        "measure",
        "diagnose",
        "mock",
    )
    for module, targets in _imports().items():
        if module.startswith("speculab.report"):
            reached = {t for t in targets if any(t.startswith(f"speculab.harness.{b}") for b in below)}
            assert not reached, f"{module} imports {sorted(reached)}: the verdict model lacks a field"


def test_the_harness_never_imports_the_report_torch_or_the_engine():
    for module, targets in _imports().items():
        if module.startswith("speculab.harness"):
            bad = {
                t for t in targets if t.split(".")[0] == "torch" or t.startswith(("speculab.report", "speculab.engine"))
            }
            assert not bad, f"{module} imports {sorted(bad)}"


def test_the_engine_never_imports_the_harness_or_the_report():
    for module, targets in _imports().items():
        if module.startswith("speculab.engine"):
            bad = {t for t in targets if t.startswith(("speculab.harness", "speculab.report"))}
            assert not bad, f"{module} imports {sorted(bad)}"


def test_only_the_imports_package_knows_its_readers():
    """A result format lives in its reader and the registry (harness.imports.registry): nothing outside the imports
    package imports an individual reader module."""
    from speculab.harness.imports.registry import READERS

    readers = {m.__name__ for m in READERS.values()}
    assert len(readers) >= 6  # the test reads the registry it guards
    outside = {
        f"{module} imports {t}"
        for module, targets in _imports().items()
        if not module.startswith("speculab.harness.imports")
        for t in targets
        if t in readers
    }
    assert not outside, f"reader modules imported outside harness.imports (go through its registry): {sorted(outside)}"


# the engine naming itself or the program's name, not knowledge about an engine: the package's NAME, the reference
# engine's owned_by and /version, the report's SVG hash salt
_ENGINE_NAME_BUDGET = 4


def test_engine_knowledge_lives_in_the_adapters():
    """An engine's name as a string constant outside its adapter (harness/servers/adapters), the readers of other
    tools' files (harness/imports) and the config's list is knowledge in the wrong place: a table keyed by engine
    that adding an engine would have to find."""
    from speculab.harness.servers.adapters import engine_kinds

    names = set(engine_kinds()) - {"other"}
    skip = ("harness/servers/adapters/", "harness/imports/", "config/")
    found = []
    for f in SRC.rglob("*.py"):
        rel = f.relative_to(SRC).as_posix()
        if rel.startswith(skip):
            continue
        tree = ast.parse(f.read_text(encoding="utf-8"))
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body
            and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)
        }
        found += [
            f"{rel}:{n.lineno} {n.value!r}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and n.value in names and id(n) not in docstrings
        ]
    assert len(found) <= _ENGINE_NAME_BUDGET, f"engine names outside the adapters ({len(found)}): {found}"


# Words every OpenAI response has, which a path through an engine's own fields passes: not an engine's knowledge.
# `metrics` is vLLM's top-level object but also the commonest key of speculab's own files: left out, so the count is
# of words that mean only an engine.
_OPENAI_WORDS = frozenset({"choices", "usage", "completion_tokens", "prompt_tokens", "metrics"})
# Where an engine's words belong: its adapter; other tools' files (imports); the reference engine writing its own
# format (it may not import the harness).
_ENGINE_HOMES = ("harness/servers/adapters/", "harness/imports/", "engine/")
# What is left outside them today, pinned so it can only shrink (#48 item 2): the wire layer and the client still
# name the engines' per-response objects (client/speculation_fields.py is to dissolve into the adapters), the
# diagnosis its metric prefixes, the mock server the vLLM format it serves.
_ENGINE_WORD_BUDGET = 99


def _engine_words() -> tuple[frozenset[str], tuple[str, ...]]:
    """Every engine's response-field names (the segments of its adapter's `response_fields` paths) and metric-name
    prefixes, read from the adapters: a new engine's words are counted without editing this test."""
    from speculab.harness.servers.adapters import adapter_for, engine_kinds

    adapters = [adapter_for(k) for k in engine_kinds()]
    fields = {
        seg for a in adapters for path in a.acceptance.response_fields.values() for seg in path.split(".")
    } - _OPENAI_WORDS
    prefixes = tuple(a.metric_prefix for a in adapters if a.metric_prefix)
    return frozenset(fields), prefixes


def _string_constants(tree: ast.AST) -> list[ast.Constant]:
    """The string constants of a module that are not docstrings (prose may name an engine's fields)."""
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
    ]


def test_engine_response_fields_and_metric_prefixes_live_in_the_adapters():
    """An engine's per-response field (`timings`, `meta_info`, `sglext`, `speculative_decoding`, ...) or metric
    prefix (`vllm:`, `sglang:`, `tgi_`, ...) as a string constant outside its adapter is knowledge out of place."""
    fields, prefixes = _engine_words()
    # the test reads the adapters it guards: were they to stop declaring their words, it would pass on nothing
    assert {"timings", "meta_info", "sglext", "speculative_decoding", "speculab_spec_decode"} <= fields
    assert {"vllm:", "sglang:", "llamacpp:", "tgi_", "trtllm_", "speculab:"} <= set(prefixes)
    found, home = [], 0
    for f in SRC.rglob("*.py"):
        rel = f.relative_to(SRC).as_posix()
        words = [
            f"{rel}:{n.lineno} {n.value!r}"
            for n in _string_constants(ast.parse(f.read_text(encoding="utf-8")))
            if n.value in fields or n.value.startswith(prefixes)
        ]
        if rel.startswith(_ENGINE_HOMES[0]):
            home += len(words)
        elif not rel.startswith(_ENGINE_HOMES):
            found += words
    assert home >= 10, "the scan finds the adapters' own words: it reads what it should"
    assert len(found) <= _ENGINE_WORD_BUDGET, f"engine words outside the adapters ({len(found)}): {found}"
