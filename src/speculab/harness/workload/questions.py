"""Spec-Bench and MT-Bench question files (`specbench:PATH`, `mtbench:PATH`): one JSON object per line,
`{"question_id": ..., "category": ..., "turns": ["...", ...], "reference": [...]?}` (both sets use this format).

Each question becomes one request with its **first turn** as the prompt (rendered as a user message for the chat
API), its category kept for per-category reports and its question_id as the pairing id. Later turns are counted
and named in the workload's source line, but not sent: replaying turn k+1 with the arm's own turn-k answer is the
multi-turn replay still to come (issue 11); until then a multi-turn set measures its first turns only, and says so.
`reference` answers are not used (they are judge material, not a correctness check).

Where users get the files: Spec-Bench's `data/spec_bench/question.jsonl` (480 questions, 13 categories) and
MT-Bench's `data/mt_bench/question.jsonl` (80 two-turn questions) in their repositories (docs/workloads.md).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

from speculab.errors import UserError
from speculab.harness.workload.items import SourceItem
from speculab.harness.workload.jsonl import parse_lines, read_jsonl_file


def load_questions(path_str: str, kind: str) -> tuple[str, list[SourceItem]]:
    """kind: "specbench" or "mtbench" (the same format; the name is for messages and the source line)."""
    path, raw, text = read_jsonl_file(path_str)
    questions = parse_lines(text, str(path), _question)
    items = [item for item, _ in questions]
    turns = Counter(n for _, n in questions)
    if not items:
        raise UserError(f"{path}: no questions (a {kind} file has one {{'question_id', 'category', 'turns'}} per line)")
    multi = sum(c for n, c in turns.items() if n > 1)
    shape = ", ".join(f"{c} with {n} turn{'s' if n != 1 else ''}" for n, c in sorted(turns.items()))
    note = f"; first turns only: {multi} questions' later turns not replayed yet" if multi else ""
    digest = hashlib.sha256(raw).hexdigest()
    return f"{path} ({kind} questions, sha256 {digest}; {len(items)} questions: {shape}{note})", items


def _question(obj: Any, default_id: str) -> tuple[SourceItem, int]:
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object with 'turns', got {type(obj).__name__}")
    turns = obj.get("turns")
    if not isinstance(turns, list) or not turns:
        raise ValueError("'turns' must be a non-empty list of strings (the user's turns)")
    if not all(isinstance(t, str) for t in turns):
        raise ValueError("every entry of 'turns' must be a string")
    if not turns[0].strip():
        raise ValueError("the first turn is empty")
    category = obj.get("category")
    if category is not None and not isinstance(category, str):
        raise ValueError(f"'category' must be a string, got {type(category).__name__}")
    qid = obj.get("question_id", default_id)
    if isinstance(qid, bool) or not isinstance(qid, (int, str)):
        raise ValueError(f"'question_id' must be an integer or a string, got {type(qid).__name__}")
    return SourceItem(prompt_id=str(qid), prompt=turns[0], category=category or None), len(turns)
