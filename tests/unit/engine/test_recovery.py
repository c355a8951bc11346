"""An exception while running one request fails that request alone; the batch and the engine carry on exactly.

Faults are injected through fakes: a model runner that raises for one poisoned request's rows (a batched
forward that fails without saying for whom), a detokenizer that raises on append, and a request that bypassed
validation. The survivors' tokens must equal a clean run's, seeded sampling included.
"""

from __future__ import annotations

import pytest
from tests.fakes.engine_fakes import CharDetokenizer, one_torch_thread, prompts, tiny_model  # noqa: F401 (autouse fixture)
from tests.fakes.spec_models import LetterDetokenizer, random_eagle, sharp_lm, truncated_copy

from speculab.engine.engine import Engine, EngineConfig
from speculab.engine.sequence import FinishReason, SamplingParams, Sequence
from speculab.engine.speculative.proposers.draft_model import DraftModelProposer
from speculab.engine.speculative.proposers.eagle import EagleProposer
from speculab.engine.speculative.proposers.ngram import NgramProposer
from speculab.engine.speculative.speculator import Speculator

POISON = "r1"
PARAMS = [
    SamplingParams(max_tokens=10, temperature=0.0),
    SamplingParams(max_tokens=10, temperature=0.0),
    SamplingParams(max_tokens=10, temperature=1.0, seed=5),
    SamplingParams(max_tokens=10, temperature=0.8, top_k=5, seed=9),
]


@pytest.fixture(scope="module")
def model():
    return tiny_model()


def make(model, **kw) -> Engine:
    cfg = EngineConfig(max_num_seqs=4, max_model_len=64, max_num_batched_tokens=128)
    return Engine(model, cfg, **kw)


def run(engine: Engine, ps: list[list[int]], params: list[SamplingParams] = PARAMS) -> dict[str, Sequence]:
    seqs = {f"r{i}": engine.add_request(f"r{i}", p, sp) for i, (p, sp) in enumerate(zip(ps, params, strict=True))}
    outputs = []
    while engine.has_unfinished():
        outputs += engine.step()
    errors = [o for o in outputs if o.finish_reason is FinishReason.ERROR]
    assert all(o.finished and o.error for o in errors)
    return seqs


def poison_runner(engine: Engine, poisoned: str, where: str = "last", after_calls: int = 0) -> None:
    """Make the runner's forward with `logits=where` ("last": prefill ends and plain decode; "all": speculative
    verification) raise whenever a batch contains a row of the poisoned request's slot."""
    original = engine.runner.forward
    calls = [0]

    def faulty(rows, logits, hidden=False):
        if logits == where:
            slots = {s.slot for s in engine.scheduler.running if s.request_id == poisoned}
            calls[0] += 1
            if calls[0] > after_calls and any(r.slot in slots for r in rows):
                raise RuntimeError("injected kernel fault")
        return original(rows, logits, hidden)

    engine.runner.forward = faulty  # type: ignore[method-assign]


@pytest.mark.parametrize("after_calls", [0, 3], ids=["at-prefill", "mid-decode"])
def test_a_batched_forward_that_fails_for_one_request_fails_only_that_request(model, after_calls):
    ps = prompts(4, seed=3)
    clean = run(make(model), ps)
    engine = make(model)
    poison_runner(engine, POISON, after_calls=after_calls)
    seqs = run(engine, ps)
    assert seqs[POISON].finish_reason is FinishReason.ERROR and "injected kernel fault" in seqs[POISON].error
    for rid, seq in seqs.items():
        if rid != POISON:  # greedy and seeded sampling alike: exactly the tokens of a run without the fault
            assert seq.output_ids == clean[rid].output_ids and seq.finish_reason is FinishReason.LENGTH
    assert len(engine.scheduler.free_slots) == 4 and not engine.has_unfinished()
    assert engine.num_generation_tokens_total == sum(len(s.output_ids) for s in seqs.values())


def test_a_fault_after_the_batch_drew_its_samples_does_not_change_seeded_neighbours(model, monkeypatch):
    """The batch's seeded rows consumed their generators before the fault: the retry restores them."""
    import speculab.engine.engine as engine_module

    ps = prompts(4, seed=10)
    params = [PARAMS[0], SamplingParams(max_tokens=10, temperature=1.0), *PARAMS[2:]]  # r1 samples (unseeded)
    clean = run(make(model), ps, params)
    real_sample = engine_module.sample

    def sample_then_fail(probs, seqs, generator):
        tokens = real_sample(probs, seqs, generator)
        if any(s.request_id == POISON for s in seqs):
            raise RuntimeError("injected fault after sampling")
        return tokens

    monkeypatch.setattr(engine_module, "sample", sample_then_fail)
    seqs = run(make(model), ps, params)
    assert seqs[POISON].finish_reason is FinishReason.ERROR
    assert all(seqs[r].output_ids == clean[r].output_ids for r in ("r0", "r2", "r3"))


def test_a_fault_while_appending_fails_only_that_request(model):
    class Exploding(CharDetokenizer):
        def push(self, ids):
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "injected")

    ps = prompts(4, seed=4)
    clean = run(make(model, detokenizer_factory=CharDetokenizer), ps)
    factory = lambda ids: Exploding(ids) if ids == ps[1] else CharDetokenizer(ids)  # noqa: E731
    seqs = run(make(model, detokenizer_factory=factory), ps)
    assert seqs[POISON].finish_reason is FinishReason.ERROR and "UnicodeDecodeError" in seqs[POISON].error
    assert all(seqs[r].output_ids == clean[r].output_ids for r in ("r0", "r2", "r3"))


def test_an_impossible_request_that_skipped_validation_fails_alone(model):
    """A stop token id past the vocabulary indexes past the logits while min_tokens bans it."""
    ps = prompts(4, seed=5)
    clean = run(make(model), ps)
    engine = make(model)
    bad = SamplingParams(max_tokens=4, min_tokens=2, stop_token_ids=(10_000,))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        engine.validate(ps[1], bad)
    sneaky = Sequence(request_id="bad", prompt_ids=[1, 2, 3], params=bad)
    engine.scheduler.add(sneaky)  # past validate(), as a bug elsewhere could let it; it shares the first batch
    others = zip(ps[:3], PARAMS[:3], strict=True)
    seqs = {f"r{i}": engine.add_request(f"r{i}", p, sp) for i, (p, sp) in enumerate(others)}
    while engine.has_unfinished():
        engine.step()
    assert sneaky.finish_reason is FinishReason.ERROR and "IndexError" in sneaky.error
    assert all(seqs[r].output_ids == clean[r].output_ids for r in seqs)


def test_a_fault_every_row_hits_fails_the_batch_and_the_engine_serves_on(model):
    engine = make(model)
    original = engine.runner.last_logits

    def broken(rows):
        raise RuntimeError("device lost")

    engine.runner.last_logits = broken
    seqs = run(engine, prompts(4, seed=6))
    assert all(s.finish_reason is FinishReason.ERROR for s in seqs.values())
    assert len(engine.scheduler.free_slots) == 4
    engine.runner.last_logits = original
    ps = prompts(4, seed=7)
    assert [s.output_ids for s in run(engine, ps).values()] == [s.output_ids for s in run(make(model), ps).values()]


def test_reset_drops_everything_and_frees_every_slot(model):
    engine = make(model)
    for i, p in enumerate(prompts(6, seed=8)):
        engine.add_request(f"r{i}", p, PARAMS[0])
    engine.step()
    assert sorted(engine.reset()) == [f"r{i}" for i in range(6)]
    assert not engine.has_unfinished() and len(engine.scheduler.free_slots) == 4
    assert len(run(engine, prompts(4, seed=9))["r0"].output_ids) == 10


@pytest.mark.parametrize("method", ["ngram", "draft", "eagle"])
def test_speculative_decoding_isolates_a_failing_row_exactly(method):
    target = sharp_lm(0)

    def engine() -> Engine:
        if method == "ngram":
            proposer = NgramProposer(4, prompt_lookup_max=3, prompt_lookup_min=1)
        elif method == "draft":
            proposer = DraftModelProposer(truncated_copy(target, 1), 4, 4, 64, target.config.vocab_size)
        else:  # the head drafts from the target's hidden states: a retried row must record them once, right
            proposer = EagleProposer(random_eagle(target, 1), target, 4, num_slots=4, max_len=64)
        cfg = EngineConfig(max_num_seqs=4, max_model_len=64, max_num_batched_tokens=128)
        return Engine(target, cfg, speculator=Speculator(proposer), detokenizer_factory=LetterDetokenizer)

    vocab = target.config.vocab_size
    ps = [[(3 * i + j) % vocab for j in range(6)] * 2 for i in range(4)]  # repeats give n-gram lookup drafts
    clean = run(engine(), ps)
    eng = engine()
    poison_runner(eng, POISON, where="all", after_calls=2)
    seqs = run(eng, ps)
    assert seqs[POISON].finish_reason is FinishReason.ERROR
    for rid in ("r0", "r2", "r3"):
        assert seqs[rid].output_ids == clean[rid].output_ids
        assert seqs[rid].spec.num_drafts == clean[rid].spec.num_drafts  # counters not bumped by the failed try
