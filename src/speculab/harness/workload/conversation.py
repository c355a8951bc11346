"""Multi-turn conversations: each turn a request of its own, turn k+1 sent behind the arm's *own* turn-k answer.

A workload item with later turns (Spec-Bench/MT-Bench `turns`, a JSONL `turns` item, ShareGPT with `?turns=all`,
`builtin:chat`) becomes one `RequestSpec` per turn, consecutive in the workload (conversation-major: all turns of
conversation 1, then conversation 2, ...), each with its own index, seed, `conversation_id` and 1-based `turn`.
Turn 1 holds the opening context (system prompt and first user message); turn k > 1 holds only what it adds.
At run time the load runner sends turn k+1 when turn k has finished, with the context `continue_turn` builds:
the context turn k sent, turn k's answer as the assistant message, then turn k+1's user message. This is how
Spec-Bench evaluates multi-turn: each arm answers its own history, so two arms pair per (conversation, turn)
only while their earlier answers agree (`RequestSpec.context_sha256` on every turn's record says what was sent).

Completions rendering: a conversation is rendered in role form from turn 1 on ("User: ...\\n\\nAssistant:"),
and turn k+1's prompt is turn k's prompt + its answer verbatim + "\\n\\nUser: ...\\n\\nAssistant:", so every
turn's prompt extends the last one byte for byte (prefix caches see the reuse a chat client produces).

If a turn fails, its conversation's later turns are not sent (there is no answer to continue from); the load
runner counts them as skipped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

from speculab.errors import UserError
from speculab.harness.records import RequestSpec


def split_turns_option(arg: str, kind: str) -> tuple[str, bool]:
    """PATH[?turns=all|1] -> (PATH, all turns?). Multi-turn sources take this option; all turns by default."""
    path, sep, query = arg.rpartition("?")
    if not sep or not query.startswith("turns="):  # a "?" in a file name is part of the path
        return arg, True
    if query == "turns=all":
        return path, True
    if query == "turns=1":
        return path, False
    raise UserError(f"{kind}:{arg}: unknown option {query!r}; use {kind}:PATH, {kind}:PATH?turns=all or ?turns=1")


def user_message(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def render_turn(text: str) -> str:
    """What a later turn appends to a completions prompt after the previous answer."""
    return f"\n\nUser: {text}\n\nAssistant:"


def continue_turn(sent: RequestSpec, answer: str, nxt: RequestSpec) -> RequestSpec:
    """The request for turn `nxt`: the context `sent` (turn k, as it was sent) plus its `answer`, then what `nxt`
    adds. Pure; the result keeps `nxt`'s index, seed, limits and ids."""
    if sent.messages is not None:
        assert nxt.messages is not None, "a chat conversation's later turns hold messages"
        messages = (*sent.messages, {"role": "assistant", "content": answer}, *nxt.messages)
        return dataclasses.replace(nxt, messages=messages, prompt=None)
    assert sent.prompt is not None and nxt.prompt is not None, "a completions conversation's turns hold prompts"
    return dataclasses.replace(nxt, prompt=sent.prompt + answer + nxt.prompt, messages=None)


def sent_as(item: RequestSpec, built: RequestSpec) -> RequestSpec:
    """`item` as it goes out when the runner handed `built` for it: a later turn of the same conversation keeps the
    context the runner built behind the arm's own earlier answers (`continue_turn`); anything else is `item`.
    Request wrappers that map the runner's positions back to workload items (two-URL blocks, client workers) use it."""
    if (
        built.turn is not None
        and built.turn > 1
        and (item.conversation_id, item.turn) == (built.conversation_id, built.turn)
    ):
        return dataclasses.replace(item, prompt=built.prompt, messages=built.messages)
    return item


def conversations(specs: Iterable[RequestSpec]) -> Iterator[list[RequestSpec]]:
    """Group a run's specs (in workload order) into conversations: a single-turn item is a conversation of one;
    a conversation starts at its turn 1 and takes the turns after it that continue it."""
    group: list[RequestSpec] = []
    for spec in specs:
        if group and (spec.turn is None or spec.turn <= 1 or spec.conversation_id != group[0].conversation_id):
            yield group
            group = []
        group.append(spec)
    if group:
        yield group


def is_multi_turn(specs: Iterable[RequestSpec]) -> bool:
    return any(s.turn is not None and s.turn > 1 for s in specs)
