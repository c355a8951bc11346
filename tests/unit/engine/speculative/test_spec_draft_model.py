"""Draft-model proposer: drafts and q against a cache-free reference, cache rollback, vocabulary checks."""

from __future__ import annotations

import json

import pytest
import torch
from tests.fakes.spec_models import Params, Row, tiny_lm

from speculab.engine.model import BatchInput, CausalLM, KVCache
from speculab.engine.sampling import processed_probs
from speculab.engine.speculative.proposers.draft_model import (
    DraftModelProposer,
    DraftVocabularyError,
    check_same_vocabulary,
)

K = 4


def full_logits(model: CausalLM, tokens: list[int]) -> torch.Tensor:
    """Logits [V] after `tokens`, from a fresh cache: the reference without any bookkeeping."""
    cache = KVCache(model.config, 1, 128, torch.float32, torch.device("cpu"))
    n = len(tokens)
    batch = BatchInput(torch.tensor([tokens]), torch.arange(n)[None], torch.tensor([0]), n)
    with torch.inference_mode():
        return model(batch, cache)[0, -1]


def _probs(logits: torch.Tensor, p: Params) -> torch.Tensor:
    return processed_probs(
        logits[None], torch.tensor([p.temperature]), torch.tensor([p.top_p]), torch.tensor([p.top_k])
    )[0]


@pytest.fixture(scope="module")
def draft() -> CausalLM:
    return tiny_lm(1)


def test_greedy_drafts_are_the_draft_models_greedy_continuation(draft):
    prop = DraftModelProposer(draft, K, num_slots=4, max_len=128, target_vocab_size=32)
    rows = [Row("a", [1, 2, 3], slot=2), Row("b", list(range(5, 25)), slot=0), Row("c", [7], slot=3)]
    out = prop.propose(rows, max_drafts=[4, 2, 4])
    assert out.lens.tolist() == [4, 2, 4]
    assert out.probs is None  # an all-greedy batch: q is one-hot at each draft, which None means
    for b, row in enumerate(rows):
        seq = list(row.prompt_ids)
        for j in range(int(out.lens[b])):
            nxt = int(full_logits(draft, seq).argmax())
            assert int(out.tokens[b, j]) == nxt
            seq.append(nxt)
        assert (out.tokens[b, int(out.lens[b]) :] == -1).all()


def test_a_mixed_batch_carries_q_and_the_greedy_rows_q_is_one_hot(draft):
    prop = DraftModelProposer(draft, K, num_slots=4, max_len=128, target_vocab_size=32)
    rows = [Row("g", [1, 2, 3], slot=0), Row("s", [4, 5], slot=1, params=Params(temperature=1.0))]
    out = prop.propose(rows, max_drafts=[3, 3])
    assert out.probs is not None
    for j in range(3):
        tok = int(out.tokens[0, j])
        assert out.probs[0, j].tolist() == torch.nn.functional.one_hot(torch.tensor(tok), 32).float().tolist()


def test_q_is_processed_draft_probability_with_the_requests_params(draft):
    prop = DraftModelProposer(draft, K, num_slots=2, max_len=128, target_vocab_size=32)
    params = [Params(temperature=0.8, top_k=5), Params(temperature=1.3, top_p=0.7)]
    rows = [
        Row(str(i), [3, 1, 4, 1, 5][: 3 + i], slot=i, generator=torch.Generator().manual_seed(i), params=p)
        for i, p in enumerate(params)
    ]
    out = prop.propose(rows, max_drafts=[K, K])
    for b, row in enumerate(rows):
        seq = list(row.prompt_ids)
        for j in range(K):
            q = _probs(full_logits(draft, seq), row.params)
            assert torch.allclose(out.probs[b, j], q, atol=1e-5)
            tok = int(out.tokens[b, j])
            assert q[tok] > 0  # drafted from q's support
            seq.append(tok)


def test_rollback_and_catch_up_keep_the_cache_equal_to_the_committed_sequence(draft):
    """Many steps of propose -> (partial) accept -> append correction, checked against a cache-free reference."""
    g = torch.Generator().manual_seed(0)
    prop = DraftModelProposer(draft, K, num_slots=3, max_len=128, target_vocab_size=32)
    params = Params(temperature=1.0)
    rows = [
        Row("long", list(range(1, 20)), slot=1, params=params),
        Row("short", [9, 8], slot=0, params=params),
        Row("mid", [4, 4, 4, 4, 4], slot=2, params=params),
    ]
    seen_all_accepted = seen_partial = seen_skipped = False
    for _ in range(12):
        caps = [int(torch.randint(0, K + 1, (1,), generator=g)) for _ in rows]
        out = prop.propose(rows, max_drafts=caps)
        for b, row in enumerate(rows):
            n = int(out.lens[b])
            if n:  # q of the first draft depends only on the committed tokens: the cache must hold exactly them
                ref = _probs(full_logits(draft, row.prompt_ids + row.output_ids), params)
                assert torch.allclose(out.probs[b, 0], ref, atol=1e-5)
            accepted = int(torch.randint(0, n + 1, (1,), generator=g))
            seen_all_accepted |= n > 0 and accepted == n
            seen_partial |= accepted < n
            seen_skipped |= n == 0
            correction = int(torch.randint(0, 32, (1,), generator=g))
            row.output_ids += [*out.tokens[b, :accepted].tolist(), correction]
    assert seen_all_accepted and seen_partial and seen_skipped


def test_release_forgets_a_request_and_a_reused_slot_starts_clean(draft):
    prop = DraftModelProposer(draft, K, num_slots=1, max_len=128, target_vocab_size=32)
    prop.propose([Row("old", [1, 2, 3, 4, 5, 6])], max_drafts=[K])
    prop.release("old")
    new = Row("new", [1, 2, 9], params=Params(temperature=1.0))
    out = prop.propose([new], max_drafts=[1])
    assert torch.allclose(out.probs[0, 0], _probs(full_logits(draft, [1, 2, 9]), new.params), atol=1e-5)


def test_draft_vocabulary_padded_to_the_targets(draft):
    prop = DraftModelProposer(draft, 2, num_slots=1, max_len=64, target_vocab_size=40)
    out = prop.propose([Row("a", [1, 2], params=Params(temperature=1.0))], max_drafts=[2])
    assert out.probs.shape == (1, 2, 40) and (out.probs[0, :, 32:] == 0).all()


def _write_tokenizer(path, vocab: dict[str, int]) -> None:
    path.mkdir(parents=True, exist_ok=True)
    (path / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": vocab}, "added_tokens": []}))


def test_vocabulary_check(tmp_path):
    vocab = {"a": 0, "b": 1, "c": 2}
    _write_tokenizer(tmp_path / "t", vocab)
    _write_tokenizer(tmp_path / "same", vocab)
    _write_tokenizer(tmp_path / "other", {"a": 0, "c": 1, "b": 2})
    check_same_vocabulary(tmp_path / "t", tmp_path / "same", 3, 8)  # padded embeddings are fine
    with pytest.raises(DraftVocabularyError, match="does not share the target's tokenizer"):
        check_same_vocabulary(tmp_path / "t", tmp_path / "other", 3, 3)
    (tmp_path / "bare1").mkdir()
    (tmp_path / "bare2").mkdir()
    check_same_vocabulary(tmp_path / "bare1", tmp_path / "bare2", 3, 3)
    with pytest.raises(DraftVocabularyError, match="vocab_size 4 but the target has 3"):
        check_same_vocabulary(tmp_path / "bare1", tmp_path / "bare2", 3, 4)


def test_a_requests_generator_advances_by_its_own_draft_count_only(draft):
    """Batch composition (other rows' caps) must not change how many numbers a request draws."""

    def drafts_with_neighbour(neighbour_cap: int) -> tuple[list[int], float]:
        prop = DraftModelProposer(draft, K, num_slots=2, max_len=128, target_vocab_size=32)
        gen = torch.Generator().manual_seed(7)
        row = Row("a", [1, 2, 3], slot=0, generator=gen, params=Params(temperature=1.0))
        other = Row("b", [4, 5], slot=1, generator=torch.Generator().manual_seed(8), params=Params(temperature=1.0))
        out = prop.propose([row, other], max_drafts=[1, neighbour_cap])
        return out.tokens[0, :1].tolist(), torch.rand(1, generator=gen).item()

    assert drafts_with_neighbour(1) == drafts_with_neighbour(4)
