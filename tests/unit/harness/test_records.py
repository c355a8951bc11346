"""A request record's requests.jsonl line: built field by field (the client writes one between a request's end and
its next send), it is what `dataclasses.asdict` made of it, key for key and in order, for every shape a record
takes; and it reads back to the same record."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from speculab.harness.records import ChunkEvent, ErrorCategory, ErrorInfo, RequestRecord, TokenCountSource


def _as_asdict_made_it(rec: RequestRecord) -> dict[str, Any]:
    """The line as the first releases wrote it, through `dataclasses.asdict`."""
    d = {("spec" if k == "speculation" else k): v for k, v in dataclasses.asdict(rec).items()}
    d["token_count_source"] = rec.token_count_source.value
    if rec.error is not None:
        d["error"]["category"] = rec.error.category.value
    if rec.turn is None:
        for key in ("conversation_id", "turn", "context_sha256"):
            del d[key]
    if rec.all_chunks:
        del d["all_chunks"]
    return d


FULL = RequestRecord(
    index=7,
    scheduled_s=1.0,
    sent_s=1.25,
    end_s=2.5,
    chunks=(ChunkEvent(1.5, "Hello", 1), ChunkEvent(2.0, " world", None)),
    output_text="Hello world",
    prompt_tokens=12,
    completion_tokens=2,
    token_count_source=TokenCountSource.CONTINUOUS_USAGE,
    finish_reason="length",
    error=ErrorInfo(ErrorCategory.DROPPED, "closed mid-stream", 200),
    warmup=True,
    stream=True,
    speculation={"drafts": 3, "accepted_per_position": [2, 1], "source": "x"},
    logprobs=({"token": "Hello", "logprob": -0.5, "top": {"Hello": -0.5}},),
    extra={"server": {"nested": [1, 2]}},
    conversation_id="c1",
    turn=2,
    context_sha256="ab" * 32,
    all_chunks=False,
)

SHAPES = {
    "every field set": FULL,
    "a plain streamed answer": RequestRecord(
        index=0, scheduled_s=0.0, sent_s=0.0, end_s=0.1, chunks=(ChunkEvent(0.05, "x", 1),), output_text="x"
    ),
    "a failure": RequestRecord(
        index=1, scheduled_s=0.0, sent_s=0.0, end_s=0.1, error=ErrorInfo(ErrorCategory.HTTP, "503", 503)
    ),
    "a turn with every chunk": dataclasses.replace(FULL, all_chunks=True, error=None),
    "a conversation id without a turn": dataclasses.replace(FULL, turn=None),
}


@pytest.mark.parametrize("name", SHAPES)
def test_the_line_is_what_asdict_made_key_for_key_in_order(name: str) -> None:
    rec = SHAPES[name]
    new, old = rec.to_dict(), _as_asdict_made_it(rec)
    assert list(new) == list(old)
    assert json.dumps(new) == json.dumps(old)
    if rec.turn is not None or rec.conversation_id is None:  # a conversation id without its turn is not written
        assert RequestRecord.from_dict(json.loads(json.dumps(new))) == rec


def test_every_field_of_the_record_is_written() -> None:
    written = set(FULL.to_dict())
    assert written == {"spec" if f.name == "speculation" else f.name for f in dataclasses.fields(RequestRecord)}


def test_changing_the_line_leaves_the_record_as_it_was() -> None:
    d = FULL.to_dict()
    d["spec"]["drafts"] = 0
    d["extra"]["server"]["nested"].append(3)
    d["error"]["message"] = ""
    assert FULL.speculation == {"drafts": 3, "accepted_per_position": [2, 1], "source": "x"}
    assert FULL.extra == {"server": {"nested": [1, 2]}} and FULL.error is not None and FULL.error.message
