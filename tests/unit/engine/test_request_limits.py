"""What the engine refuses or normalizes before a request can reach a step (the fuzzing issue's three killers)."""

from __future__ import annotations

import math

import pytest
from tests.fakes.engine_fakes import VOCAB, one_torch_thread, prompts, tiny_model  # noqa: F401 (autouse fixture)

from speculab.engine.engine import Engine, EngineConfig, InvalidRequest
from speculab.engine.sequence import GREEDY_TEMPERATURE, SamplingParams


@pytest.mark.parametrize("t", [1e-38, 5e-324, GREEDY_TEMPERATURE / 2])
def test_a_tiny_temperature_is_greedy(t):
    p = SamplingParams(temperature=t)
    assert p.temperature == 0.0 and p.greedy


def test_the_floor_itself_samples():
    assert SamplingParams(temperature=GREEDY_TEMPERATURE).temperature == GREEDY_TEMPERATURE


@pytest.mark.parametrize(
    "kw",
    [
        {"temperature": math.nan},
        {"temperature": math.inf},
        {"top_p": math.nan},
        {"top_k": 2**63},
        {"top_k": -1},
        {"stop_token_ids": (-1,)},
        {"seed": 2**64},
    ],
)
def test_impossible_parameters_are_value_errors(kw):
    with pytest.raises(ValueError):
        SamplingParams(**kw)


@pytest.fixture(scope="module")
def engine():
    return Engine(tiny_model(), EngineConfig(max_num_seqs=2, max_model_len=64, max_num_batched_tokens=64))


@pytest.mark.parametrize("ids", [(VOCAB,), (8192,), (2**62,)])
def test_stop_token_ids_outside_the_vocabulary_are_refused(engine, ids):
    with pytest.raises(InvalidRequest, match="outside the vocabulary") as e:
        engine.validate([1, 2], SamplingParams(max_tokens=4, min_tokens=2, stop_token_ids=ids))
    assert e.value.param == "stop_token_ids"


def test_a_tiny_temperature_generates_the_greedy_tokens(engine):
    ps = prompts(3, seed=2)
    greedy = [s.output_ids for s in engine.generate(ps, SamplingParams(max_tokens=8, temperature=0.0))]
    tiny = [s.output_ids for s in engine.generate(ps, SamplingParams(max_tokens=8, temperature=1e-38, seed=1))]
    assert tiny == greedy


def test_top_k_at_the_int64_limit_runs(engine):
    seqs = engine.generate(prompts(2, seed=3), SamplingParams(max_tokens=4, top_k=2**63 - 1, seed=0))
    assert all(len(s.output_ids) == 4 for s in seqs)
