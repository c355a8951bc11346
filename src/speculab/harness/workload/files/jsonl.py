"""JSONL workloads: one JSON object per line with `prompt`, `messages` or `turns` (a conversation: its user
messages, one per turn, with an optional `system` prompt), and optional max_tokens, category, checks, id and
response_format (structured outputs: OpenAI's, sent with the request and its validity judged per arm).

Every malformed line raises `UserError` naming the file, the line and the fix before any request is sent.
docs/workloads.md documents the format.
"""

from __future__ import annotations

import difflib
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from speculab.errors import UserError, user_text
from speculab.harness.workload.checks import CheckSpecError, parse_checks, parse_response_format
from speculab.harness.workload.items import SourceItem, read_workload_file

T = TypeVar("T")
_JSONL_KEYS = (
    "id",
    "prompt",
    "messages",
    "turns",
    "system",
    "max_tokens",
    "category",
    "checks",
    "expected_output_tokens",
    "response_format",
)
_ROLES = ("system", "developer", "user", "assistant", "tool")


def load_jsonl(path_str: str) -> tuple[str, list[SourceItem]]:
    path, raw, text = read_jsonl_file(path_str)
    items = parse_jsonl_text(text, str(path))
    return f"{path} (sha256 {hashlib.sha256(raw).hexdigest()})", items


def read_jsonl_file(path_str: str) -> tuple[Path, bytes, str]:
    """A JSONL workload file: its path, its bytes (for the sha256) and its UTF-8 text."""
    path, raw = read_workload_file(path_str)
    return path, raw, user_text(raw, str(path))


# The longest line a JSONL source may hold: a prompt of 16 MB is millions of tokens, past any model's context, and a
# file of one endless line is a mistake to name, not a string to hold three copies of.
MAX_LINE_CHARS = 16 * 1024 * 1024


def parse_lines(text: str, where: str, parse: Callable[[Any, str], T]) -> list[T]:
    """`parse(obj, default_id)` for each non-blank line's JSON object; a line that is not JSON, or that `parse`
    refuses with ValueError, raises UserError naming `where:line`. Every JSONL-shaped source reads through it.
    Lines end at "\\n" only: a JSON string may hold U+2028 or U+0085, which `str.splitlines` would cut at."""
    out = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_CHARS:
            raise UserError(f"{where}:{lineno}: line over {MAX_LINE_CHARS // 2**20} MB; one item per line, shorter")
        try:
            obj = json.loads(line)
            out.append(parse(obj, f"line{lineno}"))
        except json.JSONDecodeError as e:
            raise UserError(f"{where}:{lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
        except RecursionError:  # json (and the checks over it) recurse once per level
            raise UserError(
                f"{where}:{lineno}: nested too deeply (an item nests a few levels: messages, checks)"
            ) from None
        except ValueError as e:  # parse's refusals, and integers of more digits than Python converts
            raise UserError(f"{where}:{lineno}: {e}") from None
    return out


def parse_jsonl_text(text: str, where: str) -> list[SourceItem]:
    items = parse_lines(text, where, _item_from_obj)
    if not items:
        raise UserError(f"{where}: no items (expected one JSON object per line with 'prompt' or 'messages')")
    return items


def _item_from_obj(obj: Any, default_id: str) -> SourceItem:
    """Validate one JSONL object; ValueError names the key and the fix."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    for key in obj:
        close = difflib.get_close_matches(key, _JSONL_KEYS, n=1, cutoff=0.8)
        if key not in _JSONL_KEYS and close:  # other unknown keys (answers, metadata) are kept out silently
            raise ValueError(f"unknown key {key!r} (did you mean {close[0]!r}?)")
    given = [k for k in ("prompt", "messages", "turns") if k in obj]
    if len(given) != 1:
        raise ValueError(
            "each item needs exactly one of 'prompt' (a string), 'messages' (a list) or 'turns' (a conversation's "
            f"user messages){f', got {given[0]!r} and {given[1]!r}' if len(given) > 1 else ''}"
        )
    if "system" in obj and "turns" not in obj:
        raise ValueError("'system' goes with 'turns'; with 'messages' put a system message first")
    prompt = messages = None
    later: tuple[str, ...] = ()
    if "prompt" in obj:
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("'prompt' must be a non-empty string")
    elif "messages" in obj:
        messages = validate_messages(obj["messages"])
    else:
        prompt, messages, later = _conversation(obj)
    checks: tuple[dict[str, Any], ...] = ()
    if "checks" in obj:
        try:
            parse_checks(obj["checks"])
        except CheckSpecError as e:
            raise ValueError(str(e)) from None
        checks = tuple(obj["checks"])
    response_format = None
    if "response_format" in obj:
        try:
            response_format = parse_response_format(obj["response_format"])
        except CheckSpecError as e:
            raise ValueError(str(e)) from None
    category = obj.get("category")
    if category is not None and (not isinstance(category, str) or not category):
        raise ValueError("'category' must be a non-empty string")
    item_id = obj.get("id", default_id)
    if not isinstance(item_id, (str, int)) or isinstance(item_id, bool):
        raise ValueError("'id' must be a string or an integer")
    return SourceItem(
        prompt_id=str(item_id),
        prompt=prompt,
        messages=messages,
        max_tokens=_positive_int(obj, "max_tokens"),
        category=category,
        checks=checks,
        expected_output_tokens=_positive_int(obj, "expected_output_tokens"),
        later_turns=later,
        response_format=response_format,
    )


def _conversation(obj: dict[str, Any]) -> tuple[str | None, tuple[dict[str, Any], ...] | None, tuple[str, ...]]:
    """`turns` (+ `system`) -> (first prompt, or opening messages with the system prompt; later turns)."""
    turns = obj["turns"]
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns):
        raise ValueError("'turns' must be a non-empty list of non-empty strings (the user's message in each turn)")
    system = obj.get("system")
    if system is None:
        return turns[0], None, tuple(turns[1:])
    if not isinstance(system, str) or not system.strip():
        raise ValueError("'system' must be a non-empty string")
    return None, ({"role": "system", "content": system}, {"role": "user", "content": turns[0]}), tuple(turns[1:])


def _positive_int(obj: dict[str, Any], key: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"'{key}' must be a positive integer, got {value!r}")
    return value


def validate_messages(messages: Any) -> tuple[dict[str, Any], ...]:
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty list of {role, content} objects")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ValueError(f"messages[{i}] must be an object with 'role' and 'content'")
        if m["role"] not in _ROLES:
            raise ValueError(f"messages[{i}].role must be one of {', '.join(_ROLES)}, got {m['role']!r}")
        if not isinstance(m["content"], (str, list)):
            raise ValueError(f"messages[{i}].content must be a string or a list of content parts")
    return tuple(messages)
