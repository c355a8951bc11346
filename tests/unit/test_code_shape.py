"""The shape docs/architecture.md promises, read from the source: no folder of more than 12 modules, no module over
600 lines, no function over 80 lines unless its `def` line says why (`# long: REASON`), no class over 250 lines but a
registry of names (an enum of one constant per line)."""

from __future__ import annotations

import ast
from pathlib import Path

import speculab

SRC = Path(speculab.__file__).parent
MAX_MODULES, MAX_MODULE_LINES, MAX_FUNCTION_LINES = 12, 600, 80


def test_no_folder_holds_more_than_12_modules():
    crowded = {}
    for folder in {p.parent for p in SRC.rglob("*.py")}:
        n = len(list(folder.glob("*.py")))  # __init__.py counts: it is a module too
        if n > MAX_MODULES:
            crowded[str(folder.relative_to(SRC))] = n
    assert not crowded, f"folders over {MAX_MODULES} modules: {crowded}"


def test_no_module_is_over_600_lines():
    long = {str(p.relative_to(SRC)): n for p in SRC.rglob("*.py") if (n := len(p.read_text().splitlines())) > 600}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_no_function_is_over_80_lines_without_a_reason():
    long = []
    for p in SRC.rglob("*.py"):
        lines = p.read_text(encoding="utf-8").splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if n > MAX_FUNCTION_LINES and "# long:" not in lines[node.lineno - 1]:
                    long.append(f"{p.relative_to(SRC)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, (
        "functions over 80 lines (cut them at their seams, or say why with '# long: REASON'): " + "; ".join(long)
    )


MAX_CLASS_LINES, MAX_FMT_SKIPS = 250, 70


def _names_only(node: ast.ClassDef) -> bool:
    """A registry of names (an enum whose body is its docstring and one constant per line, `WarningKind`): it grows by
    a line per kind the project learns, and holds no behaviour to split into a record, a runner and strategies."""
    body = node.body[1:] if node.body and isinstance(node.body[0], ast.Expr) else node.body
    return all(isinstance(b, ast.Assign) and isinstance(b.value, ast.Constant) for b in body)


def test_no_class_is_over_250_lines():
    big = []
    for p in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef) or _names_only(node):
                continue
            if (n := node.end_lineno - node.lineno + 1) > MAX_CLASS_LINES:  # type: ignore[operator]
                big.append(f"{p.relative_to(SRC)}:{node.lineno} {node.name} ({n} lines)")
    assert not big, "classes over 250 lines (split them: a record, a runner, strategies): " + "; ".join(big)


def test_the_formatter_lays_out_the_code():
    """`# fmt: skip` only where the formatter harms reading: squeezing a function or module under its limit with it is
    what the limits exist to prevent (cut at a seam instead)."""
    skips = [
        f"{p.relative_to(SRC)}:{i}"
        for p in SRC.rglob("*.py")
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if "# fmt: skip" in line
    ]
    assert len(skips) <= MAX_FMT_SKIPS, f"{len(skips)} '# fmt: skip' lines (at most {MAX_FMT_SKIPS}): {skips}"


def test_test_files_have_unique_basenames():
    """pytest imports test files by basename (rootdir-relative packages are not used here): two files of one name in
    different folders stop collection with "import file mismatch", which CI hit with test_slo_capacity.py."""
    tests = Path(__file__).resolve().parents[1]
    seen: dict[str, list[str]] = {}
    for p in tests.rglob("test_*.py"):
        seen.setdefault(p.name, []).append(str(p.relative_to(tests)))
    twice = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not twice, f"test files sharing a basename: {twice}"


# Below the report no sentence built from numbers is kept as a note, a reason, a verdict or a warning (#48 item 3):
# those are records with a kind, worded in `report/words/` and `report/phrases.py`. The guard finds a kept sentence by
# where it goes (`stored_sentences`); the modules below are what it finds that is not a note, each for its reason.
# Lines said once, before the run, not kept anywhere: the run's size, said through RunScreen.line as the plan's
# description and the dry run's estimate are (`size_lines`' and `search_size_lines`' "requests: ..." and "launches:
# ..." lines, found by their append); their warning, when there is one, is a record.
SAID_BEFORE_THE_RUN = {"commands/run/preflight.py", "commands/run/probing/budget.py"}
# A clause of the workload's source line (`Workload.source`: `?turns=1`'s turns left out, a trace's lines sorted), the
# workload's identity: bench's manifest.json, the A/B's setup and --resume's plan identity keep it as text and compare
# checks it for equal prompts, so a record there would change what older runs are checked against.
SOURCE_LINE = {"harness/workload/files/questions.py", "harness/workload/files/trace.py"}
FILE_TEXT = {"commands/run/recommended.py", "harness/servers/adapters/speculab.py", "commands/init/starter.py"}

# Where a stored sentence goes: a note or record built from it, a list it is appended to (any list: `out` of the
# verdict's `missing` lines too), a name or keyword that says what it is, or what a function of that name returns.
_SINK_CALLS = {"note", "append", "extend", "insert", "from_text"}
_SINK_NAME = r"(note|reason|why|warning|evidence|next_step|title|affects|disaggregation|missing|excluded|verdict)s?$"
_SINK_FUNCTION = r"reason|note|why|warning|gate|verdict|disaggregation"
# Words said now, not stored: an error's message (raise UserError / EndpointError ...) and a log or printed line.
_SAID_NOW = {"debug", "info", "warning", "error", "exception", "critical", "print", "warn", "echo", "write", "log"}


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):
        return _name(node.value)
    return ""


def _is_prose(js: ast.JoinedStr) -> bool:
    """Three or more words in its fixed text: a sentence, not a label ("concurrency 8") or a flag ("--k=4")."""
    text = "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else " X " for v in js.values)
    return sum(1 for t in text.split() if sum(c.isalpha() for c in t) >= 2) >= 3


def _stored_where(js: ast.JoinedStr, chain: list[ast.AST]) -> str:
    """Where an f-string goes, walking up from it to its statement: "" when nowhere a sentence is kept."""
    import re

    if any(isinstance(p, ast.Raise) for p in chain):
        return ""
    if any(isinstance(p, ast.Call) and _name(p.func) in _SAID_NOW for p in chain):
        return ""
    for p in chain:
        if isinstance(p, ast.Call) and _name(p.func) in _SINK_CALLS:
            return _name(p.func)
        if isinstance(p, ast.keyword):
            return f"{p.arg}=" if re.search(_SINK_NAME, p.arg or "", re.I) else ""
        if isinstance(p, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = p.targets if isinstance(p, ast.Assign) else [p.target]
            return next((f"{_name(t)} =" for t in targets if re.search(_SINK_NAME, _name(t), re.I)), "")
        if isinstance(p, ast.Return):
            fn = next((q for q in chain if isinstance(q, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
            return f"return of {fn.name}" if fn is not None and re.search(_SINK_FUNCTION, fn.name) else ""
        if isinstance(p, ast.stmt):
            return ""
    return ""


def stored_sentences(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, where) of each f-string of three or more words stored as a note, reason, verdict or warning."""
    parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    out = []
    for js in (n for n in ast.walk(tree) if isinstance(n, ast.JoinedStr)):
        chain, node = [], js
        while node in parents:
            node = parents[node]
            chain.append(node)
        outermost = not any(isinstance(p, ast.JoinedStr) for p in chain)  # a nested one is judged with its outer
        if outermost and _is_prose(js) and (where := _stored_where(js, chain)):
            out.append((js.lineno, where))
    return out


def test_the_guard_finds_the_ways_a_sentence_was_stored():
    """Each way a sentence hid below the report (#48 item 3) is found; an error's message and a log line are not."""
    found = stored_sentences(
        ast.parse(
            """
def _missing(inputs):
    out = []
    out.append(f"{arm.label} at {lv.label}: no runs")
    return out
def _gate(level):
    return "missing", f"no {which} runs at {level.label}"
def acceptance_with_reason(found):
    return found, f"{found.source} shows no drafted tokens"
def finding(dec):
    return Finding(evidence=f"E2E {dec.e2e_s:.3f} s of which {dec.decode_s:.3f} s after the first token")
def fine(x, log):
    label = f"concurrency {x}"
    argv = [f"--num-speculative-tokens={x}"]
    log.info(f"the server at {x} is up and ready")
    raise UserError(f"--k must be at least 1, got {x}")
"""
        )
    )
    assert [line for line, _ in found] == [4, 7, 9, 11], found


def test_no_warning_or_note_is_a_sentence_below_the_report():
    """Warnings, notes, reasons and verdicts are records with a kind (harness.results.warnings); their sentences are
    made in the report. An f-string of words in the harness or a command that is kept (a note, a list it is appended
    to, a `reason`/`why`/`note`/`evidence`/`verdict` name or keyword, what a `*_reason`/`*_note`/`_gate` function
    returns) is a sentence built from numbers below the report; raising it as an error or logging it is saying it."""
    found: dict[str, list[tuple[int, str]]] = {}
    for f in [*(SRC / "harness").rglob("*.py"), *(SRC / "commands").rglob("*.py")]:
        if kept := stored_sentences(ast.parse(f.read_text(encoding="utf-8"))):
            found[f.relative_to(SRC).as_posix()] = kept
    allowed = SAID_BEFORE_THE_RUN | SOURCE_LINE | FILE_TEXT
    new = {k: v for k, v in found.items() if k not in allowed}
    assert not new, f"sentences stored below the report: {new}"
    assert not allowed - set(found), f"nothing found there any more (shrink the list): {allowed - set(found)}"


def test_only_a_registry_of_names_may_grow_past_the_class_limit():
    names = ast.parse("class K:\n    '''doc'''\n    A = 'a'\n    B = 'b'\n").body[0]
    behaviour = ast.parse("class C:\n    A = 'a'\n    def f(self):\n        return 1\n").body[0]
    assert _names_only(names) and not _names_only(behaviour)  # type: ignore[arg-type]
