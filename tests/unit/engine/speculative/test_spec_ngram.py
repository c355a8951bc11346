"""Prompt lookup: the vectorised search against a brute-force reference, and the proposer's bookkeeping."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from speculab.engine.speculative.proposers.ngram import NgramProposer, find_continuation


def _reference_copy(tokens: list[int], n_max: int, n_min: int, k: int) -> list[int]:
    """Obvious O(L * n) search: longest n first, latest match with a continuation, copy with overlap."""
    length = len(tokens)
    for n in range(n_max, n_min - 1, -1):
        if n >= length:
            continue
        suffix = tokens[length - n :]
        for i in range(length - n - 1, -1, -1):
            if tokens[i : i + n] == suffix:
                ext = list(tokens)
                for j in range(k):
                    ext.append(ext[i + n + j])
                return ext[length:]
    return []


@pytest.mark.parametrize("vocab", [2, 3, 8])
def test_matches_brute_force_reference(vocab):
    rng = np.random.default_rng(vocab)
    for _ in range(2000):
        length = int(rng.integers(1, 40))
        seq = rng.integers(0, vocab, length).tolist()
        n_min = int(rng.integers(1, 4))
        n_max = n_min + int(rng.integers(0, 3))
        k = int(rng.integers(1, 7))
        got = find_continuation(np.array(seq, dtype=np.int64), n_max, n_min, k).tolist()
        assert got == _reference_copy(seq, n_max, n_min, k), (seq, n_max, n_min, k)


def test_prefers_longest_n_then_most_recent_match():
    #           0  1  2  3  4  5  6  7  8  9
    seq = np.array([5, 1, 2, 7, 9, 2, 8, 1, 2], dtype=np.int64)
    # n=2 suffix (1, 2) matches at 1 -> continuation 7, 9; n=1 suffix (2) would match at 5 (more recent).
    assert find_continuation(seq, 2, 1, 2).tolist() == [7, 9]
    assert find_continuation(seq, 1, 1, 2).tolist() == [8, 1]


def test_no_match_proposes_nothing():
    assert find_continuation(np.array([1, 2, 3, 4], dtype=np.int64), 3, 1, 4).tolist() == []
    assert find_continuation(np.array([1], dtype=np.int64), 3, 1, 4).tolist() == []


def test_periodic_text_gets_full_length_drafts():
    seq = np.array([4, 1, 2, 1, 2, 1, 2], dtype=np.int64)
    assert find_continuation(seq, 2, 2, 5).tolist() == [1, 2, 1, 2, 1]


@dataclass
class _Row:
    request_id: str
    prompt_ids: list[int]
    output_ids: list[int] = field(default_factory=list)
    slot: int | None = 0
    generator: None = None
    params: None = None


def test_proposer_syncs_incrementally_and_respects_caps():
    prop = NgramProposer(num_speculative_tokens=3, prompt_lookup_max=3, prompt_lookup_min=1)
    a = _Row("a", [10, 11, 12, 13, 14, 10, 11])
    b = _Row("b", [7, 7, 7])
    c = _Row("c", [1, 2, 3])
    out = prop.propose([a, b, c], max_drafts=[3, 2, 3])
    assert out.lens.tolist() == [3, 2, 0]
    assert out.tokens.tolist() == [[12, 13, 14], [7, 7, -1], [-1, -1, -1]]
    assert out.probs is None
    # Tokens generated since: the history picks them up without re-reading the prompt.
    a.output_ids += [12, 99, 10, 11, 12]
    out = prop.propose([a], max_drafts=[3])
    assert out.tokens.tolist() == [[99, 10, 11]]
    many = _Row("m", [*range(300), 5, 6])  # outgrows the initial buffer
    assert prop.propose([many], max_drafts=[3]).tokens.tolist() == [[7, 8, 9]]
    prop.release("a")
    prop.release("unknown")  # releasing twice or never-seen ids is harmless


def test_invalid_settings_are_rejected():
    with pytest.raises(ValueError, match="prompt_lookup_min"):
        NgramProposer(4, prompt_lookup_max=1, prompt_lookup_min=2)
    with pytest.raises(ValueError, match="num_speculative_tokens"):
        NgramProposer(0, prompt_lookup_max=2, prompt_lookup_min=1)
