"""Speculative decoding end to end in the engine (fp32, CPU, tiny random models).

Greedy output with n-gram lookup, a draft model and an EAGLE head (fixed k, and k chosen per step by the adaptive
policy or skipped by batch size) is identical to plain decoding, including cuts by eos, stop strings and max_tokens
inside accepted runs; sampled output has the target's joint distribution; a batch whose rows accept different
numbers of drafts equals each row run alone.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from scipy.stats import chisquare
from tests.fakes.spec_models import LetterDetokenizer, eagle_copy, random_eagle, sharp_lm, truncated_copy

from speculab.engine.engine import Engine, EngineConfig
from speculab.engine.model import BatchInput, CausalLM, KVCache
from speculab.engine.sampling import processed_probs
from speculab.engine.sequence import FinishReason, SamplingParams
from speculab.engine.speculative.adaptive import AdaptiveConfig, AdaptivePolicy
from speculab.engine.speculative.proposers.draft_model import DraftModelProposer
from speculab.engine.speculative.proposers.eagle import EagleProposer
from speculab.engine.speculative.proposers.eagle_head import EagleHead
from speculab.engine.speculative.proposers.ngram import NgramProposer
from speculab.engine.speculative.speculator import Speculator

SLOTS, MAX_LEN = 8, 128


@pytest.fixture(scope="module")
def target() -> CausalLM:
    return sharp_lm(0)


def make_engine(model: CausalLM, spec: str | None, draft: CausalLM | EagleHead | None = None, **kw) -> Engine:
    """spec: None, ngram, draft or eagle (draft = the draft model or the head), optionally +adaptive or +skip16."""
    slots = kw.pop("max_num_seqs", SLOTS)
    speculator = None
    method, _, mode = (spec or "").partition("+")
    if method == "ngram":
        proposer = NgramProposer(4, prompt_lookup_max=3, prompt_lookup_min=1)
    elif method == "draft":
        assert isinstance(draft, CausalLM)
        proposer = DraftModelProposer(draft, 4, slots, MAX_LEN, model.config.vocab_size)
    elif method == "eagle":
        assert isinstance(draft, EagleHead)
        proposer = EagleProposer(draft, model, 4, slots, MAX_LEN)
    if method:
        # adaptive with a scripted clock: every timing reads 1 ms, so the choice follows acceptance and batch size
        ticks = iter(range(10**9))
        adaptive = AdaptivePolicy(4, AdaptiveConfig(explore_every=4)) if mode == "adaptive" else None
        speculator = Speculator(
            proposer,  # type: ignore[possibly-undefined]
            adaptive=adaptive,
            disable_by_batch_size=3 if mode == "skip" else None,
            clock=lambda: next(ticks) * 1e-3,
        )
    cfg = EngineConfig(max_num_seqs=slots, max_model_len=MAX_LEN, max_num_batched_tokens=512, max_waiting=10_000)
    return Engine(model, cfg, speculator=speculator, detokenizer_factory=LetterDetokenizer, **kw)


def proposer_for(method: str, target: CausalLM) -> CausalLM | EagleHead | None:
    if method.startswith("draft"):
        return truncated_copy(target, 1)
    if method.startswith("eagle"):
        return eagle_copy(target)
    return None


def workload(n: int, vocab: int, seed: int) -> tuple[list[list[int]], list[SamplingParams]]:
    """Prompts that repeat spans of themselves (so lookup finds matches); varied limits and stop strings."""
    g = torch.Generator().manual_seed(seed)
    prompts, params = [], []
    for i in range(n):
        base = torch.randint(0, vocab, (int(torch.randint(4, 16, (1,), generator=g)),), generator=g).tolist()
        prompts.append(base + base[: len(base) // 2] + base)
        stop = ("ab",) if i % 5 == 0 else ()
        params.append(
            SamplingParams(max_tokens=int(torch.randint(1, 40, (1,), generator=g)), temperature=0.0, stop=stop)
        )
    return prompts, params


@pytest.mark.parametrize("method", ["ngram", "draft", "eagle", "eagle+adaptive", "ngram+adaptive", "eagle+skip"])
def test_greedy_speculative_equals_plain_for_60_prompts(target, method):
    prompts, params = workload(60, target.config.vocab_size, seed=1)
    plain = make_engine(target, None).generate(prompts, params)
    # eos: a token plain decoding emits mid-output somewhere, so some accepted runs must be cut by it.
    eos = frozenset({plain[0].output_ids[len(plain[0].output_ids) // 2]}) if plain[0].output_ids else frozenset()
    plain = make_engine(target, None, eos_token_ids=eos).generate(prompts, params)
    engine = make_engine(target, method, proposer_for(method, target), eos_token_ids=eos)
    spec = engine.generate(prompts, params)
    assert [s.output_ids for s in spec] == [s.output_ids for s in plain]
    assert [s.finish_reason for s in spec] == [s.finish_reason for s in plain]
    assert [s.text for s in spec] == [s.text for s in plain]
    reasons = {s.finish_reason for s in spec}
    assert FinishReason.STOP in reasons and FinishReason.LENGTH in reasons
    c = engine.speculator.counters
    assert c.num_drafts > 0 and 0 < c.num_accepted_tokens < c.num_draft_tokens
    assert sum(s.spec.num_accepted_tokens for s in spec) == c.num_accepted_tokens
    assert c.accepted_per_pos[0] >= c.accepted_per_pos[-1] and c.accepted_per_pos[0] > 0
    assert sorted(engine.scheduler.free_slots) == list(range(SLOTS))
    if method.endswith("+adaptive"):
        assert c.skipped_by_batch_size == 0 and sum(n > 0 for n in c.steps_by_k) >= 2  # k varied
    else:
        assert c.accepted_per_pos[-1] > 0 and c.steps_by_k[4] > 0  # steps with all 4 drafts happened
    if method.endswith("+skip"):
        assert c.skipped_by_batch_size == c.steps_by_k[0] > 0  # busy steps ran without drafts


@pytest.mark.parametrize("method", ["draft", "eagle"])
def test_batch_with_mixed_acceptance_equals_each_row_alone(target, method):
    prompts, _ = workload(8, target.config.vocab_size, seed=2)
    params = [
        SamplingParams(max_tokens=30, temperature=0.0)
        if i % 2
        else SamplingParams(max_tokens=30, temperature=0.9, top_p=0.9, seed=100 + i)
        for i in range(8)
    ]
    engine = make_engine(target, method, proposer_for(method, target))
    seqs = [engine.add_request(f"r{i}", p, sp) for i, (p, sp) in enumerate(zip(prompts, params, strict=True))]
    mixed_steps = 0
    while engine.has_unfinished():
        counts = {len(out.new_token_ids) for out in engine.step() if out.new_token_ids}
        mixed_steps += len(counts) > 1
    assert mixed_steps > 0  # rows in one step emitted different numbers of tokens
    for p, sp, s in zip(prompts, params, seqs, strict=True):
        alone = make_engine(target, method, proposer_for(method, target)).generate([p], sp)[0]
        assert alone.output_ids == s.output_ids


def _full_probs(model: CausalLM, tokens: list[int], sp: SamplingParams) -> torch.Tensor:
    cache = KVCache(model.config, 1, 64, torch.float32, torch.device("cpu"))
    n = len(tokens)
    with torch.inference_mode():
        logits = model(BatchInput(torch.tensor([tokens]), torch.arange(n)[None], torch.tensor([0]), n), cache)[:, -1]
    t, p, k = torch.tensor([sp.temperature]), torch.tensor([sp.top_p]), torch.tensor([sp.top_k])
    return processed_probs(logits, t, p, k)[0].double()


@pytest.mark.parametrize("method", ["ngram", "draft", "eagle", "eagle+vocab"])
@pytest.mark.slow
def test_sampled_first_tokens_have_the_targets_joint_distribution(method):
    """5,000 seeded requests; the joint law of the first 3 tokens (prefill, then draft/verify/bonus) vs exact."""
    vocab, n_samples, n_tokens = 5, 5000, 3
    target = sharp_lm(3, vocab_size=vocab, sharpen=2.0)
    draft = sharp_lm(4, vocab_size=vocab, num_hidden_layers=1, sharpen=2.0)  # a different model: real rejections
    if method.startswith("eagle"):
        draft = random_eagle(target, 4)  # drafts through the target's (sharpened) head: q differs from p
        if method == "eagle+vocab":
            draft.set_draft_vocab(torch.tensor([0, 2, 3]))  # q is 0 on tokens 1 and 4: only the residual emits them
    sp = dict(max_tokens=n_tokens, temperature=0.9, top_k=4)
    prompt = [1, 2, 3, 1, 2]
    exact = []
    for seq in itertools.product(range(vocab), repeat=n_tokens):
        prob, prefix = 1.0, list(prompt)
        for tok in seq:
            prob *= float(_full_probs(target, prefix, SamplingParams(**sp))[tok])
            prefix.append(tok)
        exact.append(prob)
    exact_t = torch.tensor(exact, dtype=torch.float64)
    engine = make_engine(target, method.partition("+")[0], draft, max_num_seqs=64)
    outs = engine.generate([prompt] * n_samples, [SamplingParams(**sp, seed=i) for i in range(n_samples)])
    codes = [sum(t * vocab ** (n_tokens - 1 - j) for j, t in enumerate(s.output_ids)) for s in outs]
    observed = torch.bincount(torch.tensor(codes), minlength=vocab**n_tokens).double()
    c = engine.speculator.counters
    assert c.num_drafts > 500 and 0 < c.num_accepted_tokens < c.num_draft_tokens
    assert observed[exact_t == 0].sum() == 0  # top-k removed these sequences: they must never appear
    # Pool cells with small expected counts so that the chi-square approximation holds.
    exp = exact_t * n_samples
    big = exp >= 5
    obs_cells = torch.cat([observed[big], observed[~big].sum()[None]])
    exp_cells = torch.cat([exp[big], exp[~big].sum()[None]])
    assert (
        chisquare(obs_cells.numpy(), exp_cells.numpy() * obs_cells.sum().item() / exp_cells.sum().item()).pvalue > 1e-3
    )


@pytest.mark.parametrize("method", [None, "ngram", "draft", "eagle"])
def test_bfloat16_engine_runs_plain_and_speculative(target, method):
    """The CUDA default dtype, exercised on the CPU: bf16 weights and caches, float32 logits and verification,
    sampled and greedy rows in one batch. (bf16 is not bit-exact across batch shapes, so outputs are only checked
    for validity here; exactness is the fp32 tests' job.)"""
    import copy

    model = copy.deepcopy(target).to(torch.bfloat16)
    draft = proposer_for(method, model) if method else None
    engine = make_engine(model, method, None if draft is None else draft.to(torch.bfloat16))
    prompts, params = workload(6, model.config.vocab_size, seed=5)
    params = [SamplingParams(max_tokens=p.max_tokens, temperature=0.0 if i % 2 else 0.8, seed=i)
              for i, p in enumerate(params)]  # fmt: skip
    seqs = engine.generate(prompts, params)
    for s, p in zip(seqs, params, strict=True):
        assert s.is_finished and 1 <= len(s.output_ids) <= p.max_tokens
        assert all(0 <= t < model.config.vocab_size for t in s.output_ids)
    if method is not None:
        c = engine.speculator.counters  # type: ignore[union-attr]
        assert c.num_drafts > 0 and 0 <= c.num_accepted_tokens <= c.num_draft_tokens
