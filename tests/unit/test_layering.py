"""The layering docs/architecture.md promises, read from the source: no import cycle between packages; the floors
cli -> commands -> harness and cli -> report -> harness.verdict; no command imports another (init -> run and
predict -> run aside) or the report; the harness holds no command and no server and never imports the report, torch or
the engine; the two servers (engine, mock) stand on the serving base and the wire format, never on the harness."""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

import speculab

SRC = Path(speculab.__file__).parent


def _package(module: str) -> str:
    """speculab.harness.verdict.build -> speculab.harness.verdict; speculab.commands.run.plan -> speculab.commands.run;
    speculab.report.html.page -> speculab.report."""
    parts = module.split(".")
    floors = (["speculab", "harness"], ["speculab", "commands"])
    return ".".join(parts[:3] if parts[:2] in floors and len(parts) > 2 else parts[:2])


@functools.cache
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
        "search",
    )
    for module, targets in _imports().items():
        if module.startswith("speculab.report"):
            reached = {t for t in targets if any(t.startswith(f"speculab.harness.{b}") for b in below)}
            reached |= {t for t in targets if t.startswith(("speculab.commands", "speculab.mock", "speculab.cli"))}
            assert not reached, f"{module} imports {sorted(reached)}: the verdict model lacks a field"


def test_the_harness_never_imports_the_report_torch_the_engine_the_mock_or_a_command():
    above = ("speculab.report", "speculab.engine", "speculab.mock", "speculab.commands", "speculab.cli")
    for module, targets in _imports().items():
        if module.startswith("speculab.harness"):
            bad = {t for t in targets if t.split(".")[0] == "torch" or t.startswith(above)}
            assert not bad, f"{module} imports {sorted(bad)}"


def test_the_harness_holds_no_command_and_no_server():
    """The stages only: a command package or a server filed among them is the flat hall this layout ended."""
    stages = {p.name for p in (SRC / "harness").iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    commands = {p.name for p in (SRC / "commands").iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert commands == {"bench", "run", "compare", "init", "diagnose", "methods", "predict"}
    assert not stages & (commands | {"measure", "mock", "engine", "serving"}), sorted(stages)


def test_commands_stand_on_the_harness_and_never_on_the_report_or_each_other():
    """cli -> commands -> harness: a command never renders (the CLI hands its result to the report) and never imports
    another command; `init` plans a run as `run` would, and `predict` runs its probes as `run` does (the two
    exceptions: both hand a plan to run's machinery)."""
    allowed = {
        ("speculab.commands.init", "speculab.commands.run"),
        ("speculab.commands.predict", "speculab.commands.run"),
    }
    seen_commands = set()
    for module, targets in _imports().items():
        if not module.startswith("speculab.commands."):
            continue
        own = _package(module)
        seen_commands.add(own)
        for t in targets:
            assert not t.startswith(("speculab.report", "speculab.cli", "speculab.engine", "speculab.mock")), (
                f"{module} imports {t}: a command returns what it measured; the CLI presents it"
            )
            if t.startswith("speculab.commands.") and _package(t) != own:
                assert (own, _package(t)) in allowed, f"{module} imports {t}: commands never import each other"
    assert len(seen_commands) == 7  # the test reads the packages it guards


def test_only_the_cli_and_the_library_face_use_the_commands():
    users = {
        module
        for module, targets in _imports().items()
        if any(t.startswith("speculab.commands") for t in targets) and not module.startswith("speculab.commands")
    }
    assert users, "the test reads the imports it guards"
    assert all(m.startswith("speculab.cli") or m == "speculab" for m in users), sorted(users)


def test_the_engine_never_imports_the_harness_the_mock_or_the_report():
    for module, targets in _imports().items():
        if module.startswith("speculab.engine"):
            bad = {t for t in targets if t.startswith(("speculab.harness", "speculab.report", "speculab.mock"))}
            assert not bad, f"{module} imports {sorted(bad)}"


def test_the_mock_stands_on_the_serving_base_and_the_wire_format_only():
    for module, targets in _imports().items():
        if module.startswith("speculab.mock"):
            ours = {t for t in targets if t.startswith("speculab.")}
            mine = ("speculab.mock", "speculab.protocol", "speculab.serving", "speculab.errors")
            bad = {t for t in ours if not t.startswith(mine)}
            assert not bad, f"{module} imports {sorted(bad)}: the mock is a server beside the engine"


def test_the_serving_base_and_the_wire_format_know_no_server_and_no_harness():
    for module, targets in _imports().items():
        if module.startswith(("speculab.serving", "speculab.protocol")):
            ours = {t for t in targets if t.startswith("speculab.")}
            bad = {t for t in ours if not t.startswith(("speculab.serving", "speculab.protocol", "speculab.errors"))}
            assert not bad, f"{module} imports {sorted(bad)}"


def test_only_the_imports_package_knows_its_readers():
    """A result format lives in its readers and the registry (harness.imports.registry): nothing outside the imports
    package imports an individual reader module, per-request or summary-only."""
    from speculab.harness.imports.registry import TABLE

    readers = {m.__name__ for f in TABLE for m in (f.reader, f.summaries) if m is not None}
    # the test reads the registry it guards, both kinds of reader
    assert len({f.reader for f in TABLE}) >= 7 and len({f.summaries for f in TABLE} - {None}) >= 3
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


def _module_graph() -> dict[str, set[str]]:
    """Module -> the speculab modules it imports, lazily (inside a function) or not; `from pkg import mod` counts both
    the package (its `__init__` runs first) and the module."""
    modules = {
        ".".join(("speculab", *f.relative_to(SRC).with_suffix("").parts)).removesuffix(".__init__"): f
        for f in SRC.rglob("*.py")
    }
    graph: dict[str, set[str]] = defaultdict(set)
    for module, f in modules.items():
        here = module if f.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
                target = ".".join([*base, *([node.module] if node.module else [])])
                named = {f"{target}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                target, named = "", {a.name for a in node.names}
            else:
                continue
            graph[module].update(m for m in {target, *named} if m in modules and m != module)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan): each is a circle of imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = {stack.pop()}
            while v not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


# Circles of files that still stand: none since issue 48 cut the last (cli's app, the engine's recovery, adapters'
# detect). A circle added to this set must say why it cannot be cut.
_KNOWN_CIRCLES: set[frozenset[str]] = set()


def test_no_import_cycle_between_modules():
    """No module reaches itself through imports, lazy function-level ones counted: a circle among a package's files
    means they are one module in several files (load.workers and load.ray_pool were, until the split)."""
    graph = _module_graph()
    assert "speculab.harness.load.ray_pool" in graph  # the graph sees the package it guards
    new = [sorted(c) for c in _cycles(graph) if c not in _KNOWN_CIRCLES]
    assert not new, f"import cycles between modules: {new}"


def test_no_two_load_modules_import_each_other():
    graph = _module_graph()
    load = [c for c in _cycles(graph) if any(m.startswith("speculab.harness.load") for m in c)]
    assert not load, f"harness.load's files import each other in a circle: {[sorted(c) for c in load]}"


# Words every OpenAI response has, which a path through an engine's own fields passes: not an engine's knowledge.
# `metrics` is vLLM's top-level object but also the commonest key of speculab's own files: left out, so the count is
# of words that mean only an engine. `drafts`, `draft_tokens` and `accepted_tokens` are speculab's own: the keys of
# `RequestRecord.speculation` and `AcceptanceSummary`, which speculab's engine writes in its usage on purpose.
_OPENAI_WORDS = frozenset({"choices", "usage", "completion_tokens", "prompt_tokens", "metrics"})
_OWN_WORDS = frozenset({"drafts", "draft_tokens", "accepted_tokens"})
# Where an engine's words belong: its adapter (first: the scan must find its words there); other tools' files
# (imports); the two servers, which may not import the harness and write their own formats: the reference engine its
# `speculab:` names (and the serving base they stand on, whose connection counters default to that prefix), the mock
# vLLM's wire format and metric names, on purpose (it stands in for a vLLM server); and summary.json's
# `server.spec_decode` (harness/records.py), speculab's own file, whose `num_draft_tokens` is named after vLLM's
# counter as every speculab file has named it.
_ENGINE_HOMES = (
    "harness/servers/adapters/",
    "harness/imports/",
    "engine/",
    "mock/",
    "serving/exhaustion.py",
    "harness/records.py",
)
# Outside them, nothing (#48 item 2 moved the last of it into the adapters): an engine word anywhere else is a
# reading of an engine's fields or metrics that belongs in its adapter.
_ENGINE_WORD_BUDGET = 0


def _engine_words() -> tuple[frozenset[str], tuple[str, ...]]:
    """Every engine's response-field names (the segments of its adapter's `response_fields` paths) and metric-name
    prefixes, read from the adapters: a new engine's words are counted without editing this test."""
    from speculab.harness.servers.adapters import adapter_for, engine_kinds

    adapters = [adapter_for(k) for k in engine_kinds()]
    fields = (
        {seg for a in adapters for path in a.acceptance.response_fields.values() for seg in path.split(".")}
        - _OPENAI_WORDS
        - _OWN_WORDS
    )
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
    assert {"timings", "meta_info", "sglext", "speculative_decoding", "speculab_spec_decode", "draft_n"} <= fields
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


# What the CLI may read of the harness: the words and defaults of its flags' help (the engines' names, the default
# error rate) and `speculab workload`, which only loads and lists (no command of its own). Everything else it reaches
# through a command: a harness module added here is orchestration that belongs in `speculab.commands`.
_CLI_READS_OF_THE_HARNESS = {
    "speculab.harness.analysis.metrics",
    "speculab.harness.servers.adapters",
    "speculab.harness.servers.adapters.speculab",
    "speculab.harness.workload.builtin",
    "speculab.harness.workload.sources",
}


def test_the_cli_keeps_flags_and_reaches_the_harness_through_the_commands():
    reached = {
        t
        for module, targets in _imports().items()
        if module.startswith("speculab.cli")
        for t in targets
        if t.startswith("speculab.harness")
    }
    assert reached, "the test reads the imports it guards"
    assert reached <= _CLI_READS_OF_THE_HARNESS, sorted(reached - _CLI_READS_OF_THE_HARNESS)
