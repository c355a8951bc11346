"""Forced acceptance (`--forced-acceptance-rates`, vLLM's synthetic rates): a seeded draw over many steps reproduces
the unconditional per-position rates; each step keeps the forced drafts and then the target's own token; the counters,
the per-position counters and each request's stats agree; the gauge says forced; every mistake is one line."""

from __future__ import annotations

import pytest
import torch
from prometheus_client import CollectorRegistry, generate_latest
from tests.fakes.spec_models import truncated_copy

from speculab.engine.engine import Engine, EngineConfig
from speculab.engine.sequence import SamplingParams, Sequence
from speculab.engine.speculative.forced import (
    ForcedAcceptance,
    check_forced_rates,
    forced_accepts,
    parse_forced_rates,
    verify_forced,
)
from speculab.engine.speculative.metrics import SpecDecodeCollector
from speculab.engine.speculative.proposers.draft_model import DraftModelProposer
from speculab.engine.speculative.proposers.proposer import Proposal
from speculab.engine.speculative.speculator import Speculator
from speculab.errors import UserError

K, V = 4, 16
RATES = (0.8, 0.6, 0.4)  # position 3 missing: rate 0
_NGRAM2 = '{"method":"ngram","num_speculative_tokens":2}'


class RandomProposer:
    """Always drafts its full k of random tokens (as many as it may): every position is tested at every step."""

    num_speculative_tokens = K

    def __init__(self) -> None:
        self.g = torch.Generator().manual_seed(5)

    def propose(self, rows, max_drafts) -> Proposal:
        lens = torch.tensor([min(K, m) for m in max_drafts])
        return Proposal(torch.randint(0, V, (len(rows), K), generator=self.g), lens)

    def release(self, request_id: str) -> None:
        pass


def _steps(spec: Speculator, n_steps: int, rows: int = 8, temperature: float = 0.0) -> list[Sequence]:
    """Drive the speculator as the engine does (propose, then verify random target logits), checking every step's
    emitted tokens: the kept drafts, then the target's argmax at the first position not kept (greedy rows)."""
    params = SamplingParams(max_tokens=10**6, temperature=temperature)
    seqs = [Sequence(f"r{i}", [1, 2, 3], params) for i in range(rows)]
    g = torch.Generator().manual_seed(7)
    for _ in range(n_steps):
        drafts = spec.propose(seqs, [K] * rows)
        logits = torch.randn(rows, K + 1, V, generator=g)
        emitted = spec.verify(seqs, drafts, logits, g)
        for d, out, lg in zip(drafts, emitted, logits, strict=True):
            kept = len(out) - 1
            assert out[:kept] == d[:kept]
            if temperature == 0.0:
                assert out[kept] == int(lg[kept].argmax())
    return seqs


def test_conditional_rates_are_vllms_and_missing_positions_are_zero():
    c = ForcedAcceptance(RATES).conditional(5)
    assert c == pytest.approx((0.8, 0.75, 0.4 / 0.6, 0.0, 0.0))
    assert ForcedAcceptance((0.5, 0.0, 0.0)).conditional(3) == (0.5, 0.0, 0.0)  # never reached past a 0: 0, no NaN
    assert ForcedAcceptance((1.0, 1.0)).conditional(2) == (1.0, 1.0)


def test_a_seeded_draw_reproduces_the_unconditional_rates():
    """20,000 rows that each drafted K: the share keeping at least j+1 drafts is p_j (binomial sd <= 0.0036)."""
    rows = 20_000
    u = torch.rand(rows, K, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    cond = torch.tensor(ForcedAcceptance(RATES).conditional(K), dtype=torch.float64)
    kept = forced_accepts(torch.full((rows,), K), cond, u)
    shares = [(kept > j).double().mean().item() for j in range(K)]
    assert shares == pytest.approx([0.8, 0.6, 0.4, 0.0], abs=0.015)
    short = forced_accepts(torch.tensor([0, 1, 2]), torch.ones(K, dtype=torch.float64), u[:3])
    assert short.tolist() == [0, 1, 2]  # a row never keeps more than it drafted


def test_the_emitted_token_is_the_targets_own_at_the_first_position_not_kept():
    """Row 0 (greedy) keeps 2 drafts then takes the argmax at position 2; row 1 (sampled) keeps 1 and draws from p at
    position 1 with its uniform (column draft_lens: after the accept tests); row 2 keeps all 3 and takes the bonus."""
    p = torch.full((3, 4, 5), 0.01)
    p[0, 2, 4] = 1.0
    p[1, 1] = torch.tensor([0.0, 0.0, 0.5, 0.5, 0.0])  # u = 0.9 lands on token 3
    p[2, 3, 1] = 1.0
    drafts = torch.tensor([[1, 2, 3], [4, 0, -1], [2, 2, 2]])
    uniforms = torch.full((3, 4), 0.5, dtype=torch.float64)
    uniforms[1, 2] = 0.9
    out = verify_forced(
        drafts, torch.tensor([3, 2, 3]), p, torch.tensor([True, False, True]), torch.tensor([2, 1, 3]), uniforms
    )
    assert out.emitted() == [[1, 2, 4], [4, 3], [2, 2, 2, 1]]


def test_counters_per_position_counters_and_request_stats_agree_with_the_rates():
    """500 steps of 8 rows = 4,000 drafts: accepted_per_pos / drafts is p_j (sd <= 0.008); the totals are the
    per-position sums and the requests' sums; each request says forced."""
    spec = Speculator(RandomProposer(), forced=ForcedAcceptance(RATES, seed=1))
    seqs = _steps(spec, 500)
    c = spec.counters
    assert c.num_drafts == 4000 and c.num_draft_tokens == 4000 * K
    assert [n / c.num_drafts for n in c.accepted_per_pos] == pytest.approx([0.8, 0.6, 0.4, 0.0], abs=0.035)
    assert c.num_accepted_tokens == sum(c.accepted_per_pos)
    assert sum(s.spec.num_accepted_tokens for s in seqs) == c.num_accepted_tokens
    assert sum(s.spec.num_drafts for s in seqs) == c.num_drafts
    assert all(s.spec.forced for s in seqs)
    # each request's own per-position counts sum, position by position, to the engine's counter
    by_pos = [sum(s.spec.accepted_per_position[j] if j < len(s.spec.accepted_per_position) else 0 for s in seqs)
              for j in range(len(c.accepted_per_pos))]  # fmt: skip
    assert by_pos == list(c.accepted_per_pos)
    runs = {seed: Speculator(RandomProposer(), forced=ForcedAcceptance(RATES, seed=seed)) for seed in (1, 2)}
    for run in runs.values():
        _steps(run, 500)
    assert runs[1].counters.accepted_per_pos == c.accepted_per_pos  # seeded: the same draws again
    assert runs[2].counters.accepted_per_pos != c.accepted_per_pos


def test_sampled_rows_are_forced_to_the_same_rates():
    spec = Speculator(RandomProposer(), forced=ForcedAcceptance((1.0, 0.5), seed=4))
    _steps(spec, 200, temperature=0.8)
    c = spec.counters
    assert [n / c.num_drafts for n in c.accepted_per_pos] == pytest.approx([1.0, 0.5, 0.0, 0.0], abs=0.05)


def test_unforced_speculator_counts_exact_acceptance_and_says_not_forced():
    spec = Speculator(RandomProposer())
    seqs = _steps(spec, 20)
    assert spec.counters.accepted_per_pos[0] < spec.counters.num_drafts  # random drafts: the target rejects most
    assert not any(s.spec.forced for s in seqs)


def test_engine_forced_to_rate_zero_does_a_speculative_steps_work_and_keeps_the_targets_tokens(target_lm):
    """Rate 0 keeps no draft: every step emits the target's own token, so greedy text is plain decoding's, while the
    draft model still proposed K tokens per step (the cost of a speculative step is paid)."""
    cfg = EngineConfig(max_num_seqs=4, max_model_len=64, max_num_batched_tokens=256)
    prompts = [[1, 2, 3, 4], [5, 6, 7], [8, 9, 10, 11, 12]]
    params = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
    plain = Engine(target_lm, cfg).generate(prompts, params)
    draft = DraftModelProposer(truncated_copy(target_lm, 1), K, 4, 64, target_lm.config.vocab_size)
    spec = Speculator(draft, forced=ForcedAcceptance((0.0,), seed=0))
    forced = Engine(target_lm, cfg, speculator=spec).generate(prompts, params)
    assert [s.output_ids for s in forced] == [s.output_ids for s in plain]
    assert spec.counters.num_drafts > 0 and spec.counters.num_draft_tokens > spec.counters.num_drafts
    assert spec.counters.num_accepted_tokens == 0


@pytest.mark.parametrize("forced", [True, False])
def test_the_gauge_says_whether_acceptance_is_forced(forced):
    spec = Speculator(RandomProposer(), forced=ForcedAcceptance(RATES) if forced else None)
    registry = CollectorRegistry()
    registry.register(SpecDecodeCollector(spec.counters, "m", forced=spec.forced is not None))
    text = generate_latest(registry).decode()
    assert f'speculab:spec_decode_forced_acceptance{{model_name="m"}} {1.0 if forced else 0.0}' in text


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("0.8,0.9", "cannot rise"),
        ("1.2", "between 0 and 1"),
        ("-0.1", "between 0 and 1"),
        ("nan", "between 0 and 1"),
        ("0.8,,0.4", "comma-separated"),
        ("", "comma-separated"),
        ("high", "not a list of numbers"),
    ],
)
def test_malformed_rates_are_one_line(text, words):
    with pytest.raises(UserError, match=words) as e:
        parse_forced_rates(text)
    assert "\n" not in str(e.value) and "--forced-acceptance-rates" in str(e.value)


def test_rates_parse_and_more_rates_than_k_are_refused():
    assert parse_forced_rates(" 0.8, 0.6,0.4") == (0.8, 0.6, 0.4)
    assert check_forced_rates((0.8, 0.6), 2) == (0.8, 0.6)
    with pytest.raises(UserError, match="3 rates for num_speculative_tokens 2; give at most 2"):
        check_forced_rates((0.8, 0.6, 0.4), 2)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--forced-acceptance-rates", "0.8,0.6"], "needs --speculative-config"),
        (["--forced-acceptance-rates", "0.5,0.7", "--speculative-config", _NGRAM2], "cannot rise"),
        (["--forced-acceptance-rates", "0.9,0.8,0.7", "--speculative-config", _NGRAM2], "give at most 2"),
        (["--forced-acceptance-rates", "1.5", "--speculative-config", _NGRAM2], "between 0 and 1"),
    ],
)
def test_serve_refuses_bad_forced_rates_in_one_line_before_loading_anything(capsys, args, words):
    from speculab.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["serve", "/no/such/model", *args])  # refused before the model is looked for
    err = capsys.readouterr().err
    assert exit_.value.code == 2, err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
