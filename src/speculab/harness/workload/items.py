"""A workload's items: how a source gives them (`SourceItem`), and how they become the run's `RequestSpec`s.

Determinism: the items, their order and their per-request seeds depend only on (source, seed, num_prompts, api).
The run seed never reorders a source; it derives each request's sampling seed from (seed, index) through numpy's
SeedSequence. `num_prompts` smaller than the set takes the first items; larger cycles through the set again in
the same order (item i is source item i mod n, with its own seed).

A source item with later turns is a conversation and gives one request per turn (workload.conversation);
`num_prompts` counts requests, so a conversation may be cut after any turn at the end, and a conversation met
again by cycling gets the conversation id "ID#2", "ID#3", ...
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from speculab.errors import UserError
from speculab.harness.records import RequestSpec
from speculab.harness.workload.conversation import render_turn, user_message

APIS = ("completions", "chat")
_SEED_MASK = 0x7FFF_FFFF  # per-request seeds fit a signed 32-bit int: every server accepts them
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


@dataclass(frozen=True, slots=True)
class Workload:
    """The requests of one run, in order; identical in every arm and every repeat."""

    name: str  # short label for reports, e.g. "code-edit", "synthetic", "my_prompts"
    source: str  # human description: file path + sha256, or built-in set + version
    items: tuple[RequestSpec, ...]
    # how many of the items' prompts speculab synthesised (random words: `synthetic:`, a trace's `input_length`
    # lines): acceptance measured on them is not the user's traffic's (workload.validity)
    synthesised: int = 0

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True, slots=True)
class SourceItem:
    """One item as a source gives it, before seeding and rendering for an API."""

    prompt_id: str
    prompt: str | None = None
    messages: tuple[dict[str, Any], ...] | None = None
    max_tokens: int | None = None
    category: str | None = None
    checks: tuple[dict[str, Any], ...] = ()  # of a conversation: checked against its last turn's answer
    expected_output_tokens: int | None = None
    later_turns: tuple[str, ...] = ()  # a conversation's user messages after the first, one per turn
    arrival_s: float | None = None  # a trace's request: seconds after the trace's first request
    synthesised: bool = False  # speculab wrote its prompt (random words), not the user
    response_format: dict[str, Any] | None = None  # structured outputs: OpenAI's response_format, sent as given


# Longer than any served model's context (10M tokens): a prompt length past it, from a trace or a server, is a
# mistake, and synthesising it would take more memory than the machine has.
MAX_CONTEXT_TOKENS = 1 << 24


def approx_tokens(text: str) -> int:
    """Approximate token count without a tokenizer: one per word (\\w+ run) plus one per punctuation mark."""
    return len(_TOKEN_RE.findall(text))


def request_seed(seed: int, index: int) -> int:
    """The sampling seed of request `index` in a run seeded `seed`: stable, independent across indices."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1, dtype=np.uint32)[0]) & _SEED_MASK


def finalize(items: list[SourceItem], seed: int, num_prompts: int | None, api: str) -> tuple[RequestSpec, ...]:
    total = sum(1 + len(i.later_turns) for i in items) if num_prompts is None else num_prompts
    out: list[RequestSpec] = []
    cycle = 0
    while len(out) < total:
        cycle += 1
        for src in items:  # cycle in order when num_prompts exceeds the set
            for spec in _turn_specs(src, api, cycle):
                if len(out) == total:
                    return tuple(out)
                i = len(out)
                out.append(dataclasses.replace(spec, index=i, seed=request_seed(seed, i)))
    return tuple(out)


def _turn_specs(src: SourceItem, api: str, cycle: int) -> list[RequestSpec]:
    common = {
        "max_tokens": src.max_tokens,
        "category": src.category,
        "prompt_id": src.prompt_id,
        "response_format": src.response_format,
    }
    if not src.later_turns:
        prompt, messages = _render(src, api)
        return [
            RequestSpec(
                index=0,
                prompt=prompt,
                messages=messages,
                checks=src.checks,
                expected_output_tokens=src.expected_output_tokens,
                arrival_s=src.arrival_s,
                **common,
            )
        ]
    conv = src.prompt_id if cycle == 1 else f"{src.prompt_id}#{cycle}"
    opening = src.messages if src.messages is not None else (user_message(src.prompt or ""),)
    last = len(src.later_turns) + 1
    specs = []
    for turn, text in enumerate((None, *src.later_turns), start=1):
        if api == "chat":
            prompt, messages = None, opening if text is None else (user_message(text),)
        else:
            try:
                prompt, messages = (render_messages(opening, roles=True) if text is None else render_turn(text)), None
            except ValueError as e:
                raise UserError(f"item {src.prompt_id}: {e}; use --api chat for this workload") from None
        specs.append(
            RequestSpec(
                index=0,
                prompt=prompt,
                messages=messages,
                checks=src.checks if turn == last else (),
                conversation_id=conv,
                turn=turn,
                **common,
            )
        )
    return specs


def _render(src: SourceItem, api: str) -> tuple[str | None, tuple[dict[str, Any], ...] | None]:
    if api == "chat":
        return None, src.messages if src.messages is not None else (user_message(src.prompt or ""),)
    if src.prompt is not None:
        return src.prompt, None
    try:
        return render_messages(src.messages or ()), None
    except ValueError as e:
        raise UserError(f"item {src.prompt_id}: {e}; use --api chat for this workload") from None


def render_messages(messages: Sequence[dict[str, Any]], *, roles: bool = False) -> str:
    """Messages -> one completions prompt. A lone user message is its text verbatim (unless `roles`, as for a
    conversation's first turn, which later turns extend); otherwise each message becomes "Role: text"
    (System/User/Assistant/...), separated by blank lines, ending with "Assistant:"."""
    texts = [(m["role"], _content_text(m["content"])) for m in messages]
    if len(texts) == 1 and texts[0][0] == "user" and not roles:
        return texts[0][1]
    return "\n\n".join(f"{role.capitalize()}: {text}" for role, text in texts) + "\n\nAssistant:"


def _content_text(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for p in content:
        if not isinstance(p, dict) or p.get("type") != "text" or not isinstance(p.get("text"), str):
            raise ValueError("only text content parts can be rendered to a completions prompt")
        parts.append(p["text"])
    return "\n".join(parts)


def read_workload_file(path_str: str) -> tuple[Path, bytes]:
    if not path_str:
        raise UserError("workload path is empty; give a file path after the colon")
    path = Path(path_str).expanduser()
    try:
        return path, path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"workload file {path} not found") from None
    except IsADirectoryError:
        raise UserError(f"workload path {path} is a directory; give a file") from None
    except OSError as e:
        raise UserError(f"cannot read workload file {path}: {e.strerror}") from None


def item_text(item: RequestSpec) -> str:
    """The text a request sends: its prompt, or its messages' text parts joined (for length statistics)."""
    if item.prompt is not None:
        return item.prompt
    parts = []
    for m in item.messages or ():
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n".join(parts)
