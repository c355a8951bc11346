"""The engine core on a tiny random model: exactness, batching invariance, stopping, seeds, slots."""

from __future__ import annotations

import pytest
import torch
from tests.fakes.engine_fakes import VOCAB, CharDetokenizer, char_of, one_torch_thread, prompts, tiny_model  # noqa: F401 (autouse fixture)

from speculab.engine.engine import Engine, EngineConfig
from speculab.engine.model import BatchInput, KVCache
from speculab.engine.scheduler import QueueFull
from speculab.engine.sequence import FinishReason, PhaseTimes, SamplingParams

GREEDY = SamplingParams(max_tokens=12, temperature=0.0)


@pytest.fixture(scope="module")
def model():
    return tiny_model()


def make(model, **kw) -> Engine:
    kw.setdefault("max_num_seqs", 8)
    kw.setdefault("max_model_len", 128)
    kw.setdefault("max_num_batched_tokens", 256)
    eos = kw.pop("eos", frozenset())
    detok = kw.pop("detok", None)
    clock = kw.pop("clock", None)
    extra = {"clock": clock} if clock is not None else {}
    return Engine(model, EngineConfig(**kw), eos_token_ids=eos, detokenizer_factory=detok, **extra)


def reference_greedy(model, prompt: list[int], n: int) -> list[int]:
    """Greedy decoding by recomputing the whole sequence from scratch each token (no incremental cache)."""
    toks = list(prompt)
    for _ in range(n):
        cache = KVCache(model.config, 1, 128, torch.float32, torch.device("cpu"))
        s = len(toks)
        batch = BatchInput(torch.tensor([toks]), torch.arange(s)[None], torch.tensor([0]), s)
        with torch.no_grad():
            toks.append(int(model(batch, cache)[0, -1].argmax()))
    return toks[len(prompt) :]


def test_greedy_matches_full_recompute(model):
    ps = prompts(3)
    seqs = make(model).generate(ps, GREEDY)
    for p, s in zip(ps, seqs, strict=True):
        assert s.output_ids == reference_greedy(model, p, 12)
        assert s.finish_reason is FinishReason.LENGTH


def test_greedy_alone_equals_inside_batch_of_8(model):
    ps = prompts(8, seed=2)
    batched = make(model).generate(ps, GREEDY)
    for p, b in zip(ps, batched, strict=True):
        alone = make(model).generate([p], GREEDY)[0]
        assert alone.output_ids == b.output_ids


def test_chunked_prefill_and_staggered_admission_give_the_same_tokens(model):
    ps = prompts(6, seed=3, lo=10, hi=40)
    plain = [s.output_ids for s in make(model).generate(ps, GREEDY)]
    # budget 8 per step with 2 slots: prompts are prefilled in chunks while others decode, and wait for slots
    tight = make(model, max_num_seqs=2, max_num_batched_tokens=8)
    seqs = [tight.add_request(f"r{i}", p, GREEDY) for i, p in enumerate(ps)]
    max_running = 0
    while tight.has_unfinished():
        tight.step()
        max_running = max(max_running, tight.num_running)
    assert max_running == 2
    assert [s.output_ids for s in seqs] == plain


def test_slots_are_freed_and_reused(model):
    eng = make(model, max_num_seqs=2)
    seqs = eng.generate(prompts(5, seed=4), SamplingParams(max_tokens=3, temperature=0.0))
    assert all(s.is_finished and s.slot is None for s in seqs)
    assert sorted(eng.scheduler.free_slots) == [0, 1]
    assert eng.num_running == 0 and eng.kv_usage() == 0


def test_abort_frees_slot_and_reports_abort(model):
    eng = make(model, max_num_seqs=1)
    a = eng.add_request("a", [1, 2, 3], SamplingParams(max_tokens=50, temperature=0.0))
    b = eng.add_request("b", [4, 5], SamplingParams(max_tokens=2, temperature=0.0))
    eng.step()
    assert a.slot == 0 and eng.num_waiting == 1
    out = eng.abort("a")
    assert out is not None and out.finished and out.finish_reason is FinishReason.ABORT
    assert eng.scheduler.free_slots == [0] and eng.num_running == 0
    while eng.has_unfinished():
        eng.step()
    assert b.finish_reason is FinishReason.LENGTH and len(b.output_ids) == 2
    assert eng.abort("a") is None


def test_max_tokens_cut_exactly(model):
    for n in (1, 2, 7):
        s = make(model).generate([[1, 2, 3]], SamplingParams(max_tokens=n, temperature=0.0))[0]
        assert len(s.output_ids) == n and s.finish_reason is FinishReason.LENGTH


def test_eos_stops_and_min_tokens_and_ignore_eos(model):
    p = prompts(1, seed=5)[0]
    free_run = make(model).generate([p], SamplingParams(max_tokens=20, temperature=0.0))[0].output_ids
    eos = free_run[4]
    first = free_run.index(eos)
    s = make(model, eos={eos}).generate([p], SamplingParams(max_tokens=20, temperature=0.0))[0]
    assert s.output_ids == free_run[: first + 1] and s.finish_reason is FinishReason.STOP
    # min_tokens bans eos until reached: the eos token never appears before index min_tokens
    m = make(model, eos={eos}).generate([p], SamplingParams(max_tokens=20, temperature=0.0, min_tokens=first + 2))[0]
    assert eos not in m.output_ids[: first + 2]
    # ignore_eos runs to max_tokens and equals the free run
    i = make(model, eos={eos}).generate([p], SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True))[0]
    assert i.output_ids == free_run and i.finish_reason is FinishReason.LENGTH


def test_stop_token_ids(model):
    p = prompts(1, seed=6)[0]
    free_run = make(model).generate([p], SamplingParams(max_tokens=20, temperature=0.0))[0].output_ids
    stop = free_run[3]
    s = make(model).generate([p], SamplingParams(max_tokens=20, temperature=0.0, stop_token_ids=(stop,)))[0]
    assert s.output_ids == free_run[: free_run.index(stop) + 1] and s.finish_reason is FinishReason.STOP


def test_stop_string_is_never_streamed(model):
    p = prompts(1, seed=7)[0]
    free = make(model, detok=CharDetokenizer).generate([p], SamplingParams(max_tokens=30, temperature=0.0))[0]
    full_text = "".join(char_of(t) for t in free.output_ids)
    assert free.text == full_text
    stop = full_text[5:8]
    cut = full_text.index(stop)
    eng = make(model, detok=CharDetokenizer)
    seq = eng.add_request("s", p, SamplingParams(max_tokens=30, temperature=0.0, stop=(stop, "zzzzzzzzz")))
    streamed = []
    while eng.has_unfinished():
        for out in eng.step():
            streamed.append(out.text)
            assert stop not in "".join(streamed)
    assert "".join(streamed) == full_text[:cut] == seq.text
    assert seq.finish_reason is FinishReason.STOP
    # generation ends at the token whose text completed the stop string; this fake detokenizer releases a
    # token's text one push late, so that is one token after the stop string's last character
    assert len(seq.output_ids) == cut + len(stop) + 1


def test_seeded_sampling_is_reproducible_alone_and_batched(model):
    p = prompts(1, seed=8)[0]
    sp = SamplingParams(max_tokens=10, temperature=1.0, top_p=0.9, top_k=20, seed=123)
    alone = make(model).generate([p], sp)[0].output_ids
    others = prompts(7, seed=9)
    unseeded = SamplingParams(max_tokens=10, temperature=1.0)
    batch = make(model, seed=99).generate([*others[:3], p, *others[3:]], [unseeded] * 3 + [sp] + [unseeded] * 4)
    assert batch[3].output_ids == alone
    other_seed = make(model).generate([p], SamplingParams(max_tokens=10, temperature=1.0, seed=124))[0].output_ids
    assert other_seed != alone


def test_unseeded_sampling_follows_the_engine_seed(model):
    sp = SamplingParams(max_tokens=10, temperature=1.0)
    a = make(model, seed=1).generate([[1, 2]], sp)[0].output_ids
    b = make(model, seed=1).generate([[1, 2]], sp)[0].output_ids
    assert a == b


def test_logprobs_match_model_distribution(model):
    p = [3, 1, 4, 1, 5]
    s = make(model).generate([p], SamplingParams(max_tokens=4, temperature=0.0, logprobs=3))[0]
    # logprobs were collected on the sequence through its events
    eng = make(model)
    seq = eng.add_request("l", p, SamplingParams(max_tokens=4, temperature=0.0, logprobs=3))
    lps = []
    while eng.has_unfinished():
        for out in eng.step():
            lps += out.logprobs or []
    assert [lp.token_id for lp in lps] == seq.output_ids == s.output_ids
    toks = p + seq.output_ids
    cache = KVCache(model.config, 1, 128, torch.float32, torch.device("cpu"))
    batch = BatchInput(torch.tensor([toks]), torch.arange(len(toks))[None], torch.tensor([0]), len(toks))
    with torch.no_grad():
        ref = torch.log_softmax(model(batch, cache)[0], -1)
    for j, lp in enumerate(lps):
        row = ref[len(p) - 1 + j]
        assert lp.logprob == pytest.approx(float(row[lp.token_id]), abs=1e-4)
        assert len(lp.top) == 3 and lp.top[0][0] == lp.token_id  # greedy: chosen token is the most likely
        assert [v for _, v in lp.top] == sorted((v for _, v in lp.top), reverse=True)


def test_waiting_queue_is_bounded(model):
    eng = make(model, max_num_seqs=1, max_waiting=2)
    for i in range(3):  # one will take the free slot at the next step, two wait
        eng.add_request(f"r{i}", [1, 2], GREEDY)
    with pytest.raises(QueueFull):
        eng.add_request("r3", [1, 2], GREEDY)
    eng.abort("r0")
    eng.add_request("r3", [1, 2], GREEDY)


@pytest.mark.parametrize(
    ("prompt", "params", "match"),
    [
        ([], GREEDY, "empty"),
        (list(range(60)) * 3, GREEDY, "context"),
        ([1, 2], SamplingParams(max_tokens=127), "max_tokens"),
        ([VOCAB + 5], GREEDY, "vocabulary"),
    ],
)
def test_bad_requests_are_refused_without_taking_a_slot(model, prompt, params, match):
    eng = make(model)
    with pytest.raises(ValueError, match=match):
        eng.add_request("bad", prompt, params)
    assert eng.num_waiting == 0 and len(eng.scheduler.free_slots) == 8


@pytest.mark.parametrize(
    "kw", [{"max_tokens": 0}, {"temperature": -1}, {"top_p": 0}, {"top_p": 1.5}, {"top_k": -1}, {"stop": ("",)}]
)
def test_sampling_params_reject_bad_values(kw):
    with pytest.raises(ValueError):
        SamplingParams(**kw)


def test_requests_join_between_steps_and_decodes_share_one_forward(model):
    eng = make(model, max_num_seqs=8)
    calls: list[tuple[str, int]] = []
    runner = eng.runner
    forward = runner.forward  # every forward goes through it (last_logits, all_logits and write too)
    runner.forward = lambda rows, logits, hidden=False: (
        calls.append((logits, len(rows))),
        forward(rows, logits, hidden),
    )[1]
    a = eng.add_request("a", [1, 2, 3], SamplingParams(max_tokens=30, temperature=0.0))
    eng.step()  # a's prefill
    eng.step()  # a decodes
    joined = [eng.add_request(f"j{i}", [4, 5, 6, i], SamplingParams(max_tokens=5, temperature=0.0)) for i in range(6)]
    calls.clear()
    eng.step()  # a decodes while the six newcomers are prefilled: one decode forward, one prefill forward
    assert calls == [("last", 1), ("last", 6)]
    assert all(len(s.output_ids) == 1 for s in joined) and len(a.output_ids) == 3
    calls.clear()
    eng.step()  # all seven decode in a single forward
    assert calls == [("last", 7)]
    while eng.has_unfinished():
        eng.step()
    assert (
        a.output_ids == make(model).generate([[1, 2, 3]], SamplingParams(max_tokens=30, temperature=0.0))[0].output_ids
    )


def test_phase_times_on_a_scripted_clock(model):
    now = [0.0]
    eng = make(model, max_num_seqs=1, clock=lambda: now[0])
    eng.add_request("a", [1, 2], SamplingParams(max_tokens=2, temperature=0.0))
    now[0] = 0.5
    eng.add_request("b", [3, 4], SamplingParams(max_tokens=3, temperature=0.0))
    finals = {}
    for t in (1.0, 2.0, 3.0, 4.0, 5.0):
        now[0] = t
        finals.update({o.request_id: o for o in eng.step() if o.finished})
    # a: slot at 1, first token at 1 (prefill step), last at 2; b waits for a's slot until 3, then 3 tokens by 5
    assert finals["a"].phases == PhaseTimes(queue_s=1.0, prefill_s=0.0, decode_s=1.0)
    assert finals["b"].phases == PhaseTimes(queue_s=2.5, prefill_s=0.0, decode_s=2.0)


def test_sampled_first_tokens_follow_the_processed_distribution(model):
    """3000 seeded requests: the first token's frequencies match temperature/top-k/top-p probabilities (chi-square)."""
    from scipy.stats import chisquare

    from speculab.engine.sampling import processed_probs

    prompt = [5, 9, 2, 7]
    t, top_p, top_k = 1.3, 0.95, 12
    cache = KVCache(model.config, 1, 128, torch.float32, torch.device("cpu"))
    batch = BatchInput(torch.tensor([prompt]), torch.arange(4)[None], torch.tensor([0]), 4)
    with torch.no_grad():
        logits = model(batch, cache)[:, -1]
    p = processed_probs(logits, torch.tensor([t]), torch.tensor([top_p]), torch.tensor([top_k]))[0].double()
    n = 3000
    eng = make(model, max_num_seqs=64, max_num_batched_tokens=256, max_waiting=n)
    params = [SamplingParams(max_tokens=1, temperature=t, top_p=top_p, top_k=top_k, seed=i) for i in range(n)]
    seqs = eng.generate([prompt] * n, params)
    counts = torch.bincount(torch.tensor([s.output_ids[0] for s in seqs]), minlength=VOCAB).double()
    assert counts[p == 0].sum() == 0  # nothing outside top-k / top-p is ever drawn
    keep = p * n >= 5
    observed = torch.cat([counts[keep], counts[~keep].sum()[None]])
    expected = torch.cat([p[keep], p[~keep].sum()[None]]) * n
    if expected[-1] == 0:
        observed, expected = observed[:-1], expected[:-1]
    expected *= n / expected.sum()  # float32 probabilities: renormalise so the totals agree exactly
    assert chisquare(observed.numpy(), expected.numpy()).pvalue > 1e-3
