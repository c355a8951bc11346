"""verify(): exactness of greedy and speculative sampling on synthetic Markov-chain targets and drafts.

The target and the draft are first-order Markov chains over a small vocabulary (p(. | previous token),
q(. | previous token)), so the exact distribution of any generated prefix is known in closed form. Each test
generates 200k sequences in parallel with the real loop a speculative engine runs (draft, verify, append)
and checks the joint distribution of the first tokens against the target chain with a chi-square test.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from scipy.stats import chisquare

from speculab.engine.speculative.verify import draw_uniforms, verify

V = 5  # vocabulary
K = 3  # max drafts per step
T = 3  # tokens whose joint distribution is checked
N = 200_000


def _chain(seed: int, alpha: float = 2.0) -> torch.Tensor:
    """A random Markov chain [V, V]: row = distribution of the next token given the previous one."""
    torch.manual_seed(seed)
    return torch.distributions.Dirichlet(torch.full((V,), alpha)).sample((V,)).double()


def _joint(p_table: torch.Tensor, start: int) -> torch.Tensor:
    """Exact probability [V**T] of each first-T-token sequence under the chain, lexicographic order."""
    out = []
    for seq in itertools.product(range(V), repeat=T):
        prob, prev = 1.0, start
        for tok in seq:
            prob *= float(p_table[prev, tok])
            prev = tok
        out.append(prob)
    return torch.tensor(out, dtype=torch.float64)


def _generate(
    p_table: torch.Tensor,
    q_table: torch.Tensor | None,
    mode: str,
    seed: int,
    report_q: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, int]]:
    """Run draft -> verify -> append for N rows until each has T tokens; returns tokens [N, T] and path counts.

    mode "full": drafts sampled from q_table, full q passed to verify (a draft model);
    mode "onehot": drafts are q_table's argmax chain, q one-hot (n-gram lookup);
    mode "greedy": drafts as in onehot, target probabilities one-hot at p's argmax, greedy rows.
    report_q, if given, is the q table passed to verify instead of the one drafted from (a lying proposer).
    """
    g = torch.Generator().manual_seed(seed)
    start = 0
    out = torch.full((N, T), -1, dtype=torch.long)
    filled = torch.zeros(N, dtype=torch.long)
    last = torch.full((N,), start, dtype=torch.long)
    p_used = p_table
    if mode == "greedy":
        p_used = torch.zeros_like(p_table).scatter_(-1, p_table.argmax(-1, keepdim=True), 1.0)
    counts = {"bonus": 0, "rejected": 0, "empty_drafts": 0}
    while bool((filled < T).any()):
        rows = torch.nonzero(filled < T).squeeze(-1)
        b = rows.numel()
        lens = torch.randint(0, K + 1, (b,), generator=g)
        drafts = torch.zeros((b, K), dtype=torch.long)
        prev = last[rows]
        q_probs = torch.zeros((b, K, V), dtype=torch.float64)
        p_probs = torch.zeros((b, K + 1, V), dtype=torch.float64)
        for i in range(K):
            p_probs[:, i] = p_used[prev]
            if mode == "full":
                q_i = q_table[prev]
                x = torch.multinomial(q_i, 1, generator=g).squeeze(-1)
                q_probs[:, i] = (report_q if report_q is not None else q_table)[prev]
            else:
                x = q_table[prev].argmax(-1)
            drafts[:, i] = x
            prev = x
        p_probs[:, K] = p_used[prev]
        # Padding beyond a row's length must be ignored: poison it.
        pad = torch.arange(K)[None, :] >= lens[:, None]
        drafts = torch.where(pad, -1, drafts)
        greedy = torch.full((b,), mode == "greedy")
        u = torch.rand((b, K + 1), generator=g, dtype=torch.float64)
        res = verify(drafts, lens, p_probs, q_probs if mode == "full" else None, greedy, u)
        counts["bonus"] += int(((res.num_accepted == lens) & (lens > 0)).sum())
        counts["rejected"] += int((res.num_accepted < lens).sum())
        counts["empty_drafts"] += int((lens == 0).sum())
        n_emit = res.num_accepted + 1  # [b]
        f = filled[rows]
        cols = f[:, None] + torch.arange(K + 1)[None, :]  # [b, K+1] destination column of each emitted token
        keep = (torch.arange(K + 1)[None, :] < n_emit[:, None]) & (cols < T)
        out[rows[:, None].expand_as(cols)[keep], cols[keep]] = res.tokens[keep]
        filled[rows] = (f + n_emit).clamp(max=T)
        last[rows] = res.tokens.gather(1, res.num_accepted[:, None]).squeeze(-1)
    return out, counts


def _chi2_pvalue(tokens: torch.Tensor, p_table: torch.Tensor) -> float:
    expected = _joint(p_table, start=0)
    expected = expected / expected.sum() * N
    assert float(expected.min()) >= 5, "chi-square needs expected counts >= 5; choose another seed"
    codes = (tokens * torch.tensor([V ** (T - 1 - i) for i in range(T)])).sum(-1)
    observed = torch.bincount(codes, minlength=V**T).double()
    return float(chisquare(observed.numpy(), expected.numpy()).pvalue)


@pytest.fixture(scope="module")
def tables() -> tuple[torch.Tensor, torch.Tensor]:
    return _chain(1), _chain(2)


def test_full_q_matches_target_distribution(tables):
    p_table, q_table = tables
    tokens, counts = _generate(p_table, q_table, "full", seed=11)
    assert counts["bonus"] > 10_000 and counts["rejected"] > 10_000 and counts["empty_drafts"] > 10_000
    assert _chi2_pvalue(tokens, p_table) > 1e-3


def test_one_hot_q_matches_target_distribution(tables):
    p_table, q_table = tables
    tokens, counts = _generate(p_table, q_table, "onehot", seed=12)
    assert counts["bonus"] > 10_000 and counts["rejected"] > 10_000
    assert _chi2_pvalue(tokens, p_table) > 1e-3


def test_all_accepted_bonus_path_matches_target_distribution(tables):
    # q == p: every draft is accepted (ratio 1), so every emitted non-draft token is a bonus token.
    p_table, _ = tables
    tokens, counts = _generate(p_table, p_table, "full", seed=13)
    assert counts["rejected"] == 0 and counts["bonus"] > 50_000
    assert _chi2_pvalue(tokens, p_table) > 1e-3


def test_chi_square_detects_a_proposer_that_misreports_q(tables):
    # The test must be able to fail: verifying with a q other than the one drafted from is biased.
    p_table, q_table = tables
    tokens, _ = _generate(p_table, q_table, "full", seed=14, report_q=torch.full((V, V), 1.0 / V).double())
    assert _chi2_pvalue(tokens, p_table) < 1e-6


def test_greedy_emits_exactly_the_target_argmax_chain():
    p_table = _chain(6)  # argmax chain 0 -> 4 -> 0 -> 4: not a fixed point, so drafts can be right and wrong
    # A draft that agrees with the target's argmax except after the chain's first token: from the start
    # token it drafts one right token then wrong ones, so both rejections and all-accepted steps occur.
    target_next = p_table.argmax(-1)
    draft_next = target_next.clone()
    c1 = int(target_next[0])
    draft_next[c1] = (target_next[c1] + 1) % V
    agree = torch.zeros_like(p_table).scatter_(-1, draft_next[:, None], 1.0)
    tokens, counts = _generate(p_table, agree, "greedy", seed=15)
    assert counts["rejected"] > 10_000 and counts["bonus"] > 10_000
    expected, prev = [], 0
    for _ in range(T):
        prev = int(p_table[prev].argmax())
        expected.append(prev)
    assert (tokens == torch.tensor(expected)).all()


def test_greedy_accepts_while_argmax_agrees_then_emits_targets_token():
    p = torch.zeros(1, 4, V, dtype=torch.float64)
    p[0, torch.arange(4), torch.tensor([2, 3, 1, 4])] = 1.0
    res = verify(
        torch.tensor([[2, 3, 0]]), torch.tensor([3]), p, None, torch.tensor([True]), torch.zeros(1, 4).double()
    )
    assert res.num_accepted.tolist() == [2]
    assert res.emitted() == [[2, 3, 1]]


def test_ragged_rows_are_independent():
    torch.manual_seed(0)
    p = torch.softmax(torch.randn(3, 4, V), -1)
    q = torch.softmax(torch.randn(3, 3, V), -1)
    drafts = torch.tensor([[1, 2, 3], [4, -1, -1], [0, 0, -1]])
    lens = torch.tensor([3, 1, 2])
    greedy = torch.tensor([False, True, False])
    u = torch.rand(3, 4, dtype=torch.float64)
    together = verify(drafts, lens, p, q, greedy, u).emitted()
    alone = [
        verify(drafts[i : i + 1], lens[i : i + 1], p[i : i + 1], q[i : i + 1], greedy[i : i + 1], u[i : i + 1])
        for i in range(3)
    ]
    assert together == [a.emitted()[0] for a in alone]


def test_per_request_generators_make_rows_independent_of_batch_composition():
    torch.manual_seed(0)
    p = torch.softmax(torch.randn(2, 4, V), -1)
    q = torch.softmax(torch.randn(2, 3, V), -1)
    drafts, lens, greedy = torch.tensor([[1, 2, 3], [4, 0, 1]]), torch.tensor([3, 2]), torch.tensor([False, False])

    def run(rows: list[int]) -> list[list[int]]:
        gens = [torch.Generator().manual_seed(100 + r) for r in rows]
        u = draw_uniforms(gens, lens[rows].tolist(), greedy[rows].tolist(), num_columns=4)
        return verify(drafts[rows], lens[rows], p[rows], q[rows], greedy[rows], u).emitted()

    assert run([0, 1]) == [run([0])[0], run([1])[0]]
    assert run([1, 0]) == [run([1])[0], run([0])[0]]


def test_draw_uniforms_takes_n_plus_one_numbers_per_sampled_row_and_none_for_greedy():
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    draw_uniforms([g1, None], [2, 3], [False, True], num_columns=4)
    torch.rand(3, generator=g2, dtype=torch.float64)
    assert torch.rand(1, generator=g1).item() == torch.rand(1, generator=g2).item()


def test_draft_with_zero_draft_probability_is_rejected_and_resampled_from_p():
    p = torch.tensor([[[0.5, 0.5, 0.0, 0.0, 0.0], [0.2, 0.2, 0.2, 0.2, 0.2]]], dtype=torch.float64)
    q = torch.tensor([[[0.0, 0.0, 1.0, 0.0, 0.0]]], dtype=torch.float64)  # claims it could never draft token 1
    for u_final in (0.0, 0.49, 0.51, 0.999999):
        u = torch.tensor([[0.0, u_final]], dtype=torch.float64)
        res = verify(torch.tensor([[1]]), torch.tensor([1]), p, q, torch.tensor([False]), u)
        assert res.num_accepted.tolist() == [0]
        assert res.emitted()[0][0] in (0, 1)  # drawn from p's support, no NaN, no crash


def test_residual_that_vanishes_in_floating_point_falls_back_to_p():
    p = torch.tensor([[[0.25, 0.25, 0.5, 0.0, 0.0], [0.2] * 5]], dtype=torch.float64)
    q = p[:, :1].clone()
    q[0, 0, 2] += 1e-15  # p(x) < q(x) by rounding only: a rejection is possible, max(0, p - q) is all zero
    u = torch.tensor([[1.0 - 1e-17, 0.6]], dtype=torch.float64)
    res = verify(torch.tensor([[2]]), torch.tensor([1]), p, q, torch.tensor([False]), u)
    assert res.num_accepted.tolist() == [0]
    assert res.emitted() == [[2]]  # inverse cdf of p at 0.6: 0.25, 0.5 | 1.0 -> token 2


def test_sampling_never_returns_a_zero_probability_token():
    probs = torch.tensor([[[0.0, 0.3, 0.0, 0.7, 0.0]]], dtype=torch.float64)
    for u in (0.0, 0.3, 0.2999999, 1.0 - 1e-16):
        res = verify(
            torch.zeros(1, 0, dtype=torch.long),
            torch.tensor([0]),
            probs,
            None,
            torch.tensor([False]),
            torch.tensor([[u]], dtype=torch.float64),
        )
        assert res.emitted()[0][0] in (1, 3)
