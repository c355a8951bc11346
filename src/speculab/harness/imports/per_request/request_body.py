"""The request body a tool kept as JSON text (GenAI-Perf's `request_inputs.payload`, inference-perf's `request`): the
prompt or messages it sent, and its `max_tokens`, as the `RequestSpec` compare pairs prompts by."""

from __future__ import annotations

import json
from typing import Any

from speculab.harness.records import RequestSpec


def request_spec(index: int, body: Any) -> RequestSpec | None:
    """Request `index` as the body says it (a JSON string or an object); None where it holds no prompt or messages
    (the prompt is then unknown, and compare pairs by what else the file keeps)."""
    try:
        sent = json.loads(body) if isinstance(body, str) else body
    except ValueError:
        return None
    if not isinstance(sent, dict):
        return None
    cap = sent.get("max_tokens", sent.get("max_completion_tokens"))
    cap = cap if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None
    if isinstance(sent.get("prompt"), str):
        return RequestSpec(index=index, prompt=sent["prompt"], max_tokens=cap)
    msgs = sent.get("messages")
    if isinstance(msgs, list) and all(isinstance(m, dict) for m in msgs):
        return RequestSpec(index=index, messages=tuple(msgs), max_tokens=cap)
    return None


def first_choice(data: Any) -> dict[str, Any]:
    """`choices[0]` of a streamed OpenAI chunk ({} where it has none)."""
    choices = data.get("choices") if isinstance(data, dict) else None
    return choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}


def chunk_text(data: Any) -> str:
    """The generated text one streamed OpenAI chunk carries (`choices[0].text` or `.delta.content`); "" where none."""
    first = first_choice(data)
    delta = first.get("delta") if isinstance(first.get("delta"), dict) else {}
    text = first.get("text") or delta.get("content")
    return text if isinstance(text, str) else ""


def usage_tokens(usage: Any, key: str) -> int | None:
    """`usage[key]` (the server's prompt_tokens / completion_tokens) where it is a count; else None."""
    v = usage.get(key) if isinstance(usage, dict) else None
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None
