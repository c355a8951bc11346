"""EAGLE proposer and head checkpoints: drafts and q against a cache-free reference over many propose / accept /
rollback steps, feature bookkeeping, and loading the layouts vLLM and SafeAILab/EAGLE use (with one-line errors)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file
from tests.fakes.spec_models import Params, Row, random_eagle, tiny_lm

from speculab.engine.model import BatchInput, CausalLM, KVCache
from speculab.engine.sampling import processed_probs
from speculab.engine.speculative.proposers.eagle import EagleProposer, _HeadState
from speculab.engine.speculative.proposers.eagle_head import EagleHead, EagleHeadError, load_eagle_head

K = 4


@pytest.fixture(scope="module")
def target() -> CausalLM:
    return tiny_lm(0)


@pytest.fixture(scope="module")
def head(target) -> EagleHead:
    return random_eagle(target, 1, fc_bias=True)


def target_features(target: CausalLM, tokens: list[int]) -> torch.Tensor:
    """The target's final-norm hidden states [L, H] over `tokens` from a fresh cache."""
    cache = KVCache(target.config, 1, 128, torch.float32, torch.device("cpu"))
    n = len(tokens)
    with torch.inference_mode():
        return target.hidden_states(
            BatchInput(torch.tensor([tokens]), torch.arange(n)[None], torch.tensor([0]), n), cache
        )[0]


def reference_feature(head: EagleHead, target: CausalLM, tokens: list[int], feats: torch.Tensor) -> torch.Tensor:
    """The head's prediction [H] at the last of entries (tokens[i], feats[i]) at positions 0.., no cache reuse."""
    n = len(tokens)
    cache = KVCache(head.config, 1, 128, torch.float32, torch.device("cpu"))
    batch = BatchInput(torch.tensor([tokens]), torch.arange(n)[None], torch.tensor([0]), n)
    with torch.inference_mode():
        return head(target.model.embed_tokens(batch.tokens), feats[None], batch, cache)[0, -1]


@torch.inference_mode()
def reference_q(head, target, committed: list[int], drafts: list[int], p: Params) -> list[torch.Tensor]:
    """q for each draft position, given the drafts before it: the target's features for the committed part, the
    head's own predictions for the drafted part; a draft vocabulary masks the other tokens' logits."""
    h = target_features(target, committed)[:-1]  # h_0 .. h_{n-1}; t_n (the last) is not in the target's cache yet
    tokens, feats = committed[1:], h
    out = []
    for j in range(len(drafts) + 1):
        f = reference_feature(head, target, tokens, feats)
        logits = target.lm_head(f).float()[None]
        ids = head.draft_token_ids()
        if ids is not None:
            outside = torch.ones(logits.shape[-1], dtype=torch.bool)
            outside[ids] = False
            logits = logits.masked_fill(outside, float("-inf"))
        out.append(
            processed_probs(logits, torch.tensor([p.temperature]), torch.tensor([p.top_p]), torch.tensor([p.top_k]))[0]
        )
        if j < len(drafts):
            tokens, feats = [*tokens, drafts[j]], torch.cat([feats, f[None]])
    return out


def record(prop: EagleProposer, target: CausalLM, rows: list[Row], starts: list[int]) -> None:
    """What the engine hands over: the target's features of positions [start, len - 1) for each row."""
    feats = [target_features(target, r.prompt_ids + r.output_ids) for r in rows]
    width = max(len(f) for f in feats)
    hidden = torch.zeros(len(rows), width, target.config.hidden_size)
    counts = []
    for i, (f, s) in enumerate(zip(feats, starts, strict=True)):
        n = len(f) - 1 - s
        hidden[i, :n] = f[s : s + n]
        counts.append(n)
    prop.record_target_hidden([r.request_id for r in rows], starts, hidden, counts)


@pytest.mark.parametrize("draft_vocab", [None, [0, 3, 4, 7, 9, 10, 11, 15, 20, 21, 25, 31]])
def test_drafts_and_q_equal_the_cache_free_reference_over_many_steps(target, draft_vocab):
    head = random_eagle(target, 1, fc_bias=True)
    if draft_vocab is not None:
        head.set_draft_vocab(torch.tensor(draft_vocab))
    g = torch.Generator().manual_seed(0)
    prop = EagleProposer(head, target, K, num_slots=3, max_len=128)
    # the adaptive policy's start-up timings write dummy entries into free slots: they must never be read
    assert prop.calibration_draft(3) == 3 and prop.calibration_draft(3, 64) == 3 * 64
    assert prop.calibration_draft(1, 500) == 128  # capped by the cache
    params = [Params(temperature=1.0), Params(temperature=0.7, top_k=5), Params()]
    rows = [
        Row("long", list(range(1, 20)), slot=1, params=params[0], generator=torch.Generator().manual_seed(1)),
        Row("short", [9, 8], slot=0, params=params[1], generator=torch.Generator().manual_seed(2)),
        Row("greedy", [4, 4, 4, 4, 4], slot=2, params=params[2]),
    ]
    for r in rows:  # prefill emitted one token each
        r.output_ids.append(int(torch.randint(0, 32, (1,), generator=g)))
    record(prop, target, rows, [0, 0, 0])
    # what resuming would catch up over: each row's whole prompt (the long forward); none before features arrive
    assert prop.backlog_tokens(rows) == sum(len(r.prompt_ids) for r in rows if len(r.prompt_ids) > K + 1)
    seen = {"all": False, "partial": False, "skipped": False}
    for _ in range(10):
        caps = [int(torch.randint(0, K + 1, (1,), generator=g)) for _ in rows]
        starts = [len(r.prompt_ids) + len(r.output_ids) - 1 for r in rows]
        out = prop.propose(rows, caps)
        for b, row in enumerate(rows):
            n = int(out.lens[b])
            drafts = out.tokens[b, :n].tolist()
            ref = reference_q(head, target, row.prompt_ids + row.output_ids, drafts[:-1], row.params)
            for j in range(n):
                if out.probs is not None:
                    # float32 through other kernels differs in the fifth decimal (AVX512 on an AMD EPYC: 1.9e-5);
                    # a wrong cache entry changes the distribution itself
                    assert torch.allclose(out.probs[b, j], ref[j], atol=1e-4), (row.request_id, j)
                else:
                    assert drafts[j] == int(ref[j].argmax())
                assert ref[j][drafts[j]] > 0  # drafted from q's support
                assert draft_vocab is None or drafts[j] in draft_vocab
            accepted = int(torch.randint(0, n + 1, (1,), generator=g))
            seen["all"] |= n > 0 and accepted == n
            seen["partial"] |= accepted < n
            seen["skipped"] |= n == 0
            row.output_ids += [*drafts[:accepted], int(torch.randint(0, 32, (1,), generator=g))]
        record(prop, target, rows, starts)  # the verified positions' features, as the engine records them
    assert all(seen.values())


def test_features_of_rolled_back_positions_are_replaced():
    s = _HeadState()
    s.add(0, torch.zeros(5, 2))
    s.add(5, torch.ones(2, 2))
    assert s.feature_end == 7
    s.add(6, torch.full((3, 2), 2.0))  # the target recomputed position 6 onwards
    assert s.feature_end == 9 and torch.cat(s.pending)[:, 0].tolist() == [0, 0, 0, 0, 0, 1, 2, 2, 2]
    s.head_len, s.pending, s.num_pending = 9, [], 0
    s.add(4, torch.full((1, 2), 3.0))  # before the head's cache: it is rolled back too
    assert (s.head_len, s.feature_end) == (4, 5)
    with pytest.raises(RuntimeError, match="jump"):
        s.add(7, torch.zeros(1, 2))


def test_proposing_without_recorded_features_is_an_engine_bug(target, head):
    prop = EagleProposer(head, target, K, num_slots=1, max_len=64)
    with pytest.raises(RuntimeError, match="must record the target's hidden states"):
        prop.propose([Row("a", [1, 2, 3], output_ids=[4])], [K])


def test_proposing_twice_redoes_the_last_entry(target, head):
    prop = EagleProposer(head, target, K, num_slots=1, max_len=64)
    row = Row("a", [1, 2, 3], output_ids=[4])
    record(prop, target, [row], [0])
    first = prop.propose([row], [K]).tokens.tolist()
    assert prop.propose([row], [K]).tokens.tolist() == first


# --- checkpoints ----------------------------------------------------------------------------------------
def _save(path, head: EagleHead, target: CausalLM, *, fmt: str = "safetensors", prefix: str = "", extra=None):
    path.mkdir(parents=True, exist_ok=True)
    sd = {prefix + k: v.clone() for k, v in head.state_dict().items()}
    sd |= extra or {}
    if fmt == "bin":
        torch.save(sd, path / "pytorch_model.bin")
    else:
        save_file(sd, str(path / "model.safetensors"))
    (path / "config.json").write_text(json.dumps(head.to_hf()))
    return path


def test_loads_the_layouts_eagle_checkpoints_come_in(tmp_path, target, head):
    ids = torch.tensor([[1, 5, 7, 2]])
    batch = BatchInput(ids, torch.arange(4)[None], torch.tensor([0]), 4)
    feats = torch.randn(1, 4, target.config.hidden_size, generator=torch.Generator().manual_seed(0))

    def run(h: EagleHead) -> torch.Tensor:
        cache = KVCache(h.config, 1, 8, torch.float32, torch.device("cpu"))
        with torch.no_grad():
            return h(target.model.embed_tokens(ids), feats, batch, cache)

    want = run(head)
    # SafeAILab/EAGLE: pytorch_model.bin with a copy of the embedding (and, from some trainers, layer 0's unused norm)
    eagle_style = {"embed_tokens.weight": target.model.embed_tokens.weight.clone(),
                   "layers.0.input_layernorm.weight": torch.ones(target.config.hidden_size)}  # fmt: skip
    for name, kw in [
        ("st", {}),
        ("bin", {"fmt": "bin", "extra": eagle_style}),
        ("prefixed", {"prefix": "model."}),
    ]:
        loaded = load_eagle_head(_save(tmp_path / name, head, target, **kw), target)
        assert loaded.fc.bias is not None and loaded.lm_head is None
        assert torch.allclose(run(loaded), want, atol=1e-6), name
    cfg = json.loads((tmp_path / "st" / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"] and cfg["bias"] is True and cfg["num_hidden_layers"] == 1
    # a draft vocabulary (EAGLE-3's d2t) survives the round trip
    vocab_head = random_eagle(target, 1)
    vocab_head.set_draft_vocab(torch.tensor([5, 1, 30, 2]))
    loaded = load_eagle_head(_save(tmp_path / "d2t", vocab_head, target), target)
    assert loaded.draft_token_ids().tolist() == [1, 2, 5, 30] and loaded.to_hf()["draft_vocab_size"] == 4
    # an own lm_head is used instead of the target's (vLLM's rule)
    own = load_eagle_head(_save(tmp_path / "own", head, target, extra={"lm_head.weight": torch.zeros(32, 32)}), target)
    assert own.lm_head is not None and EagleProposer(own, target, 2, 1, 16).lm_head is own.lm_head


def test_a_head_for_another_target_is_refused_in_one_line(tmp_path, target, head):
    wide = tiny_lm(0, hidden_size=64)
    with pytest.raises(EagleHeadError, match="hidden_size 32 but the target has 64"):
        load_eagle_head(_save(tmp_path / "a", head, target), wide)
    other_vocab = tiny_lm(0, vocab_size=40)
    with pytest.raises(EagleHeadError, match="vocab_size 32 but the target has 40"):
        load_eagle_head(_save(tmp_path / "b", head, target), other_vocab)
    bad_embed = {"embed_tokens.weight": torch.zeros(30, 32)}
    with pytest.raises(EagleHeadError, match="embeds 30 tokens"):
        load_eagle_head(_save(tmp_path / "c", head, target, extra=bad_embed), target)
    with pytest.raises(EagleHeadError, match=r"unexpected midlayer\.norm\.weight"):
        load_eagle_head(_save(tmp_path / "d", head, target, extra={"midlayer.norm.weight": torch.ones(32)}), target)
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "config.json").write_text(
        json.dumps({**head.to_hf(), "architectures": ["Eagle3LlamaForCausalLM"]})
    )
    with pytest.raises(EagleHeadError, match="EAGLE-3 and MTP heads are not supported"):
        load_eagle_head(tmp_path / "e", target)
    with pytest.raises(EagleHeadError, match=r"has no config\.json"):
        load_eagle_head(tmp_path, target)


def test_the_adaptive_policy_prices_eagle_drafts_and_catch_ups_at_start(target, head):
    from speculab.engine.speculative.adaptive import AdaptivePolicy
    from speculab.engine.speculative.speculator import Speculator

    policy = AdaptivePolicy(K)
    spec = Speculator(EagleProposer(head, target, K, num_slots=2, max_len=128), adaptive=policy)
    spec.calibrate(lambda rows, width: None, max_rows=2)  # the target's forward is the engine's: a no-op here
    assert set(policy.costs.draft_obs) == {1, 2} and policy.costs.proposer(2) > 0
    assert len(policy.costs.catch_up_obs) == 3 and policy.costs.catch_up(100) > 0
