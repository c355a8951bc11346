"""The acceptance formulas, the one place they live: vLLM's definitions and their edges (nothing drafted, unknown
counts), so counters, per-response fields and sums over repeats agree."""

from __future__ import annotations

import pytest

from speculab.harness.analysis.acceptance import acceptance_length, acceptance_rate, tokens_per_step


@pytest.mark.parametrize(
    ("accepted", "drafted", "want"),
    [(6, 8, 0.75), (0, 8, 0.0), (0, 0, None), (3, None, None), (2.0, 4.0, 0.5)],
)
def test_acceptance_rate_is_accepted_over_drafted_tokens(accepted, drafted, want):
    assert acceptance_rate(accepted, drafted) == want


@pytest.mark.parametrize(
    ("accepted", "drafts", "want"),
    [(6, 4, 2.5), (0, 4, 1.0), (6, 0, None), (6, None, None)],  # the bonus token: 1 + accepted / steps
)
def test_acceptance_length_counts_the_targets_own_token(accepted, drafts, want):
    assert acceptance_length(accepted, drafts) == want


@pytest.mark.parametrize(
    ("output_tokens", "accepted", "want"),
    [(9, 4, 2.0), (9, 0, 1.0), (1, 0, None), (0, 0, None), (9, 8, None)],  # (n - 1) / (n - 1 - accepted)
)
def test_tokens_per_step_without_reported_steps(output_tokens, accepted, want):
    assert tokens_per_step(output_tokens, accepted) == want


def test_every_step_drafting_makes_both_lengths_agree():
    # 4 steps after the prefill, each accepting 2 of its drafts: 1 + 4*3 = 13 tokens, 8 accepted
    assert tokens_per_step(13, 8) == acceptance_length(8, 4) == 3.0
