"""summary.json: one name, and one way every kind is written (strict JSON, atomically)."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

from speculab.harness.results.summary_file import SUMMARY_FILE, write_summary_file

SRC = Path(__file__).resolve().parents[4] / "src" / "speculab"


def test_a_summary_is_strict_json_laid_out_as_its_kind_asks(tmp_path: Path) -> None:
    path = write_summary_file(tmp_path / "new", {"schema": "x/1", "figure": math.nan, "runs": (1, 2)}, indent=1)
    text = path.read_text(encoding="utf-8")
    assert path == tmp_path / "new" / SUMMARY_FILE
    assert text == '{\n "schema": "x/1",\n "figure": null,\n "runs": [\n  1,\n  2\n ]\n}\n'
    assert json.loads(text)["figure"] is None
    assert [p.name for p in path.parent.iterdir()] == [SUMMARY_FILE]  # no temporary file left beside it


def test_the_file_is_named_in_one_place() -> None:
    """A second "summary.json" in the code is a second idea of where a result's summary lives (docstrings aside;
    harness/imports names other tools' files, and vLLM's `bench sweep serve` writes a summary.json of its own)."""
    found = []
    for f in SRC.rglob("*.py"):
        if f.is_relative_to(SRC / "harness" / "imports"):
            continue
        tree = ast.parse(f.read_text(encoding="utf-8"))
        docs = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body
            and isinstance(n.body[0], ast.Expr)
        }
        found += [
            f"{f.relative_to(SRC)}:{n.lineno}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and n.value == SUMMARY_FILE and id(n) not in docs
        ]
    assert found == ["harness/results/summary_file.py:19"], found


def test_every_summary_is_written_through_the_one_writer() -> None:
    """No module writes summary.json by another way (a `write_json(SUMMARY, ...)` of its own): bench's RunDir goes
    through `write_summary_file` like the A/B report and compare's run-level summary."""
    names = {"SUMMARY", "SUMMARY_FILE"}
    found = []
    for f in SRC.rglob("*.py"):
        for n in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if not isinstance(n, ast.Call):
                continue
            called = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            if called in {"write_json", "write_json_atomic", "write_atomic", "write_text", "dump"}:
                named = {a.id for a in ast.walk(n) if isinstance(a, ast.Name)} | {
                    a.attr for a in ast.walk(n) if isinstance(a, ast.Attribute)
                }
                if named & names:
                    found.append(f"{f.relative_to(SRC)}:{n.lineno}")
    assert found == [], found


def test_a_bench_summary_is_laid_out_as_bench_always_wrote_it(tmp_path: Path) -> None:
    """RunDir.write_summary: byte for byte what bench wrote before it used the one writer (strict JSON, indent 2)."""
    from speculab.harness.results.run_dir import RunDir
    from speculab.harness.results.strict_json import dumps

    summary = {"schema": "speculab.bench.summary/2", "metrics": {"ttft_s": {"p50": 0.25, "p99": math.inf}}}
    RunDir(tmp_path).write_summary(summary)
    assert (tmp_path / SUMMARY_FILE).read_text(encoding="utf-8") == dumps(summary, indent=2) + "\n"
    assert '\n  "metrics": {\n    "ttft_s"' in (tmp_path / SUMMARY_FILE).read_text(encoding="utf-8")
