"""Spec-Bench and MT-Bench question files (`specbench:PATH`, `mtbench:PATH`): one JSON object per line,
`{"question_id": ..., "category": ..., "turns": ["...", ...], "reference": [...]?}` (both sets use this format).

Each question becomes a conversation (workload.conversation): one request per turn, turn k+1 sent behind the
arm's own turn-k answer, as Spec-Bench evaluates multi-turn. The category is kept for per-category reports and
the question_id is the conversation id. `?turns=1` keeps first turns only (one request per question).
`reference` answers are not used (they are judge material, not a correctness check).

SPEED-Bench (`speedbench:PATH`) has the same core fields (plus sub_category, source, difficulty, multiturn) and is
published as parquet: a `.parquet` file is read with pyarrow when it is installed (`pip install pyarrow`), and a
JSONL export of it (`datasets.load_dataset(...)["test"].to_json("speed.jsonl")`) reads without it.

Where users get the files: Spec-Bench's `data/spec_bench/question.jsonl` (480 questions, 13 categories) and
MT-Bench's `data/mt_bench/question.jsonl` (80 two-turn questions) in their repositories (docs/workloads.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
from collections import Counter
from pathlib import Path
from typing import Any

from speculab.errors import UserError
from speculab.harness.workload.conversation import split_turns_option
from speculab.harness.workload.files.jsonl import parse_lines, read_jsonl_file
from speculab.harness.workload.items import SourceItem, read_workload_file


def load_questions(arg: str, kind: str) -> tuple[str, list[SourceItem]]:
    """kind: "specbench" or "mtbench" (the same format; the name is for messages and the source line).
    `arg` is PATH, or PATH?turns=all (the default) / PATH?turns=1 (first turns only)."""
    path_str, all_turns = split_turns_option(arg, kind)
    if path_str.endswith(".parquet"):
        path, raw, rows = _parquet_rows(path_str)
        items = [_at_row(path, i, row) for i, row in enumerate(rows)]
    else:
        path, raw, text = read_jsonl_file(path_str)
        items = parse_lines(text, str(path), _question)
    if not items:
        raise UserError(f"{path}: no questions (a {kind} file has one {{'question_id', 'category', 'turns'}} per line)")
    turns = Counter(1 + len(i.later_turns) for i in items)
    shape = ", ".join(f"{c} with {n} turn{'s' if n != 1 else ''}" for n, c in sorted(turns.items()))
    note = ""
    if not all_turns:
        dropped = sum(len(i.later_turns) for i in items)
        items = [dataclasses.replace(i, later_turns=()) for i in items]
        note = f"; first turns only (?turns=1): {dropped} later turns not sent"
    digest = hashlib.sha256(raw).hexdigest()
    return f"{path} ({kind} questions, sha256 {digest}; {len(items)} questions: {shape}{note})", items


def _parquet_rows(path_str: str) -> tuple[Path, bytes, list[dict[str, Any]]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError(
            f"{path_str} is parquet: pip install pyarrow to read it, or export it to JSONL (one question per line)"
        ) from None
    path, raw = read_workload_file(path_str)
    try:
        table = pq.read_table(io.BytesIO(raw))
    except Exception as e:  # pyarrow raises several types for a file that is not parquet
        raise UserError(f"{path}: not a readable parquet file ({type(e).__name__}: {e})") from None
    return path, raw, table.to_pylist()


def _at_row(path: Path, i: int, row: dict[str, Any]) -> SourceItem:
    try:
        return _question(row, f"row{i}")
    except ValueError as e:
        raise UserError(f"{path}: row {i}: {e}") from None


def _question(obj: Any, default_id: str) -> SourceItem:
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object with 'turns', got {type(obj).__name__}")
    turns = obj.get("turns")
    if not isinstance(turns, list) or not turns:
        raise ValueError("'turns' must be a non-empty list of strings (the user's turns)")
    if not all(isinstance(t, str) for t in turns):
        raise ValueError("every entry of 'turns' must be a string")
    for k, t in enumerate(turns, start=1):
        if not t.strip():
            raise ValueError(f"turn {k} is empty")
    category = obj.get("category")
    if category is not None and not isinstance(category, str):
        raise ValueError(f"'category' must be a string, got {type(category).__name__}")
    qid = obj.get("question_id", default_id)
    if isinstance(qid, bool) or not isinstance(qid, (int, str)):
        raise ValueError(f"'question_id' must be an integer or a string, got {type(qid).__name__}")
    return SourceItem(prompt_id=str(qid), prompt=turns[0], category=category or None, later_turns=tuple(turns[1:]))
