"""ShareGPT workloads: the first human turn of each conversation, the reply right after it setting max_tokens;
with `sharegpt:PATH?turns=all`, every human turn, replayed as a conversation (workload.conversation).

All turns: the human turns are the conversation's user messages in order (the recorded replies are not sent:
each arm answers its own history); max_tokens comes from the first reply, as in first-turn mode, and applies to
every turn. A conversation with a system turn first keeps it as the system prompt.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from speculab.errors import UserError, user_text
from speculab.harness.workload.conversation import split_turns_option
from speculab.harness.workload.items import SourceItem, approx_tokens, read_workload_file

_HUMAN = ("human", "user")
_ASSISTANT = ("gpt", "assistant", "chatgpt", "bard", "bing", "model")


def load_sharegpt(arg: str) -> tuple[str, list[SourceItem]]:
    """First human turn of each conversation -> prompt; the reply right after it sets max_tokens (see docs).
    `arg` is PATH (first turns), PATH?turns=1 (the same) or PATH?turns=all (every human turn)."""
    path_str, all_turns = split_turns_option(arg, "sharegpt") if "?turns=" in arg else (arg, False)
    path, raw = read_workload_file(path_str)
    text = user_text(raw, str(path))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        line = _line_past_depth(text, 500)
        raise UserError(f"{path}:{line}: nested too deeply; a ShareGPT file is a list of conversations") from None
    except ValueError as e:  # an integer of more digits than Python converts
        raise UserError(f"{path}: {e}") from None
    if not isinstance(data, list):
        raise UserError(
            f"{path}: a ShareGPT file is a JSON list of {{'conversations': [...]}}, got {type(data).__name__}"
        )
    items, skipped = [], 0
    for i, entry in enumerate(data):
        convs = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(convs, list) or not all(isinstance(t, dict) for t in convs):
            raise UserError(f"{path}: entry {i}: needs 'conversations', a list of {{'from', 'value'}} turns")
        item = _sharegpt_item(convs, entry.get("id", f"entry{i}"), all_turns)
        if item is None:
            skipped += 1
        else:
            items.append(item)
    if not items:
        raise UserError(f"{path}: no conversation has a non-empty human turn; is this a ShareGPT file?")
    digest = hashlib.sha256(raw).hexdigest()
    mode = f"all human turns, {sum(1 + len(i.later_turns) for i in items)} in all" if all_turns else "first turns"
    return f"{path} (sha256 {digest}; {len(items)} conversations used, {skipped} skipped; {mode})", items


def _line_past_depth(text: str, depth: int) -> int:
    """The line where JSON `text` first nests past `depth` (brackets outside strings): where a file that nests
    too deeply for the parser went wrong. Only on that error path: a character loop is slow on big files."""
    level, line, in_str, escaped = 0, 1, False, False
    for ch in text:
        if ch == "\n":
            line += 1
        elif in_str:
            escaped, in_str = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            level += 1
            if level > depth:
                return line
        elif ch in "]}":
            level -= 1
    return line


def _sharegpt_item(turns: list[dict[str, Any]], entry_id: Any, all_turns: bool) -> SourceItem | None:
    for k, turn in enumerate(turns):
        if turn.get("from") in _HUMAN:
            prompt = turn.get("value")
            if not isinstance(prompt, str) or not prompt.strip():
                return None
            reply = turns[k + 1] if k + 1 < len(turns) else None
            out = None
            if reply is not None and reply.get("from") in _ASSISTANT and isinstance(reply.get("value"), str):
                out = max(1, approx_tokens(reply["value"]))
            if not all_turns:
                return SourceItem(prompt_id=str(entry_id), prompt=prompt, max_tokens=out, expected_output_tokens=out)
            # later human turns, in order; an empty one ends the conversation there (nothing to ask)
            later = []
            for t in turns[k + 1 :]:
                if t.get("from") in _HUMAN:
                    value = t.get("value")
                    if not isinstance(value, str) or not value.strip():
                        break
                    later.append(value)
            system = turns[0].get("value") if k > 0 and turns[0].get("from") == "system" else None
            messages = None
            if isinstance(system, str) and system.strip():
                messages = ({"role": "system", "content": system}, {"role": "user", "content": prompt})
            return SourceItem(
                prompt_id=str(entry_id),
                prompt=None if messages else prompt,
                messages=messages,
                max_tokens=out,
                later_turns=tuple(later),
            )
    return None
