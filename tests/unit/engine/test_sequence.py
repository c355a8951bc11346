"""Sequence stopping rules: several tokens appended at once cut exactly where one-at-a-time would."""

from __future__ import annotations

import pytest
from tests.fakes.engine_fakes import CharDetokenizer, char_of, one_torch_thread  # noqa: F401 (autouse fixture)

from speculab.engine.sequence import FinishReason, SamplingParams, Sequence


def seq(**kw) -> Sequence:
    eos = kw.pop("eos", frozenset({9}))
    return Sequence("r", [1, 2, 3], SamplingParams(**kw), eos_token_ids=eos, detokenizer=CharDetokenizer([1, 2, 3]))


def one_at_a_time(tokens: list[int], **kw) -> Sequence:
    s = seq(**kw)
    for t in tokens:
        s.append([t])
    return s


@pytest.mark.parametrize(
    "kw",
    [
        {"max_tokens": 4},
        {"max_tokens": 20},
        {"max_tokens": 20, "ignore_eos": True},
        {"max_tokens": 20, "min_tokens": 5},
        {"max_tokens": 20, "stop_token_ids": (5,)},
        {"max_tokens": 20, "stop": ("ef",)},
        {"max_tokens": 20, "stop": ("ef",), "min_tokens": 7},
    ],
)
def test_bulk_append_cuts_where_single_appends_do(kw):
    tokens = [0, 4, 5, 2, 9, 4, 5, 7, 9, 1]  # letters a e f c j e f h j b; 9 is eos
    single = one_at_a_time(tokens, **kw)
    bulk = seq(**kw)
    kept = bulk.append(tokens)
    assert kept == len(bulk.output_ids)
    assert bulk.output_ids == single.output_ids
    assert bulk.finish_reason == single.finish_reason
    assert bulk.take_output().text == single.take_output().text


def test_cuts():
    assert one_at_a_time([0, 9, 1]).output_ids == [0, 9]
    assert one_at_a_time([0, 9, 1], ignore_eos=True, max_tokens=3).output_ids == [0, 9, 1]
    s = one_at_a_time([0, 4, 5, 2], stop=("ef",), max_tokens=10)
    assert s.finish_reason is FinishReason.STOP and s.take_output().text == "a"


def test_stop_string_holdback_while_running():
    s = seq(max_tokens=20, stop=("xyz",))
    s.append([0, 1, 2, 3])  # "abcd", the detokenizer holds "d"
    assert s.take_output().text == "a"  # the last len(stop) - 1 = 2 characters are held back
    s.finish(FinishReason.ABORT)
    assert s.take_output().text == "bcd"


def test_truncate_only_rolls_back():
    s = seq(max_tokens=5)
    s.num_cached = 6
    s.truncate(4)
    assert s.num_cached == 4
    with pytest.raises(ValueError):
        s.truncate(5)


def test_detokenizer_text_concatenates_to_full_decode():
    s = seq(max_tokens=6)
    texts = []
    for t in [3, 4, 5, 6, 7, 8]:
        s.append([t])
        texts.append(s.take_output().text)
    assert "".join(texts) == "".join(char_of(t) for t in [3, 4, 5, 6, 7, 8])


class HoldAllDetokenizer:
    """Releases nothing until flush (like a run of incomplete UTF-8 bytes)."""

    def __init__(self):
        self.ids: list[int] = []

    def push(self, ids: list[int]) -> str:
        self.ids += ids
        return ""

    def flush(self) -> str:
        return "".join(char_of(i) for i in self.ids)


def test_stop_string_in_text_released_at_flush_is_still_cut():
    s = Sequence("r", [1], SamplingParams(max_tokens=4, stop=("cd",)), detokenizer=HoldAllDetokenizer())
    s.append([0, 1, 2, 3])  # "abcd" appears only when flushed at max_tokens
    out = s.take_output()
    assert out.text == "ab" and out.finish_reason is FinishReason.STOP and out.num_output_tokens == 4
