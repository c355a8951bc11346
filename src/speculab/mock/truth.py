"""The true TPOT of a scripted mock at a given number of requests in flight, and the crossover of two mocks.

Why: a search for the load where speculation stops paying (issue 39) needs a server whose crossover is known
exactly, to check an estimate against. Two mocks run as the arms of an A/B script one: the baseline sends one
token per chunk, the candidate two (speculation's tokens per step) at the same `--gap-ms`, so it is 2x faster per
token at one stream; the candidate's `--decode-slowdown s` stretches its gaps by s per extra request in flight, so
its per-token time relative to the baseline's grows linearly, (1 + s (c - 1)) / 2, and crosses 1 at c = 1 + 1 / s.

These are the script's own rules (`script.chunk_sizes` and the decode rule in `server.py`), read with every
request of a level in flight for its whole life (`running` = c), which a closed loop at concurrency c keeps.
TPOT is the harness's: (E2E - TTFT) / (output tokens - 1), so only the gaps after the first chunk count.

The step-batched mode (issue 49: a scripted engine whose speedup at every load and K is known) has its truth here too.
A closed loop at concurrency c steps at batch c (script.py says why), each step lasting `script.step_s(cfg, c)`; a
request's TPOT spans the decode steps after its first token, each giving 1 + accepted tokens, so its expected TPOT
is step_s(c) x E[steps to make n - 1 tokens] / (n - 1), with E[steps] counted exactly from the acceptance
distribution (the last step cut to fit). For long outputs that is step_s(c) / tokens per step, with tokens per step
1 + sum_j prod_(i<=j) c_i for the content's conditional rates (1 + sum_j p_j for forced unconditional ones).
In both modes a mock's TPOT is linear in c, which gives the crossover of two mocks in closed form.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from speculab.mock.script import MockConfig, chunk_sizes, conditional_acceptance, step_s


def true_tpot_s(cfg: MockConfig, running: int, output_tokens: int | None = None) -> float | None:
    """The mock's TPOT in seconds for a request of `output_tokens` (default: the mock's natural length) with
    `running` requests in flight throughout (the step-batched mode: its expected TPOT at batch `running`); None for
    a one-token answer (no TPOT)."""
    n = cfg.output_tokens if output_tokens is None else output_tokens
    if n < 2:
        return None
    if cfg.step_batched:
        return step_s(cfg, running) * expected_steps(cfg, n - 1) / (n - 1)
    gaps = len(chunk_sizes(cfg.chunk_pattern, n)) - 1
    gap = cfg.gap_s * (1 + cfg.decode_slowdown_per_request * (max(running, 1) - 1))
    return gaps * gap / (n - 1)


def true_tpot_speedup(
    baseline: MockConfig, candidate: MockConfig, running: int, output_tokens: int | None = None
) -> float | None:
    """Baseline TPOT / candidate TPOT at `running` requests in flight on each (> 1: the candidate is faster), as
    the verdict's TPOT speedup reports it; None when either has no TPOT or the candidate's is zero."""
    b, c = true_tpot_s(baseline, running, output_tokens), true_tpot_s(candidate, running, output_tokens)
    return b / c if b is not None and c else None


def true_crossover(baseline: MockConfig, candidate: MockConfig, output_tokens: int | None = None) -> float | None:
    """The concurrency (a real number >= 1) where the two mocks' TPOTs are equal; None when the effect never
    changes sign at or above one stream. Each mock's TPOT is linear in c (per stream: a (1 + s (c - 1)) with s its
    `decode_slowdown_per_request`; step-batched: (a + b c + d c k + g k) x steps per token), so the crossing
    solves a linear equation in c."""
    a_b, a_c = true_tpot_s(baseline, 1, output_tokens), true_tpot_s(candidate, 1, output_tokens)
    b2, c2 = true_tpot_s(baseline, 2, output_tokens), true_tpot_s(candidate, 2, output_tokens)
    if a_b is None or a_c is None or b2 is None or c2 is None:
        return None
    slope = (b2 - a_b) - (c2 - a_c)  # how much faster the baseline's TPOT grows per request in flight
    if abs(slope) <= 1e-12 * max(a_b, a_c):  # parallel: one arm is faster at every load, or equal at every load
        return None
    c = 1 + (a_c - a_b) / slope
    return c if c >= 1 else None


# --------------------------------------------------------------------------------------------------------------
# The step-batched mode: acceptance, steps, K


def with_k(cfg: MockConfig, k: int) -> MockConfig:
    """The same step-batched engine and content speculating k tokens per step (0: plain steps); forced rates keep
    their first k positions (a chain's leading positions do not depend on k)."""
    if not cfg.step_batched:
        raise ValueError("with_k needs a step-batched MockConfig (step_batched=True)")
    forced = cfg.forced_acceptance_rates
    return replace(cfg, num_speculative_tokens=k, forced_acceptance_rates=forced[:k] if forced and k > 0 else None)


def accepted_distribution(cfg: MockConfig) -> tuple[float, ...]:
    """P(j drafts accepted) in one verification step, j = 0..k: P(at least j) is the product of the first j
    conditional rates."""
    at_least = [1.0]
    for rate in conditional_acceptance(cfg):
        at_least.append(at_least[-1] * rate)
    at_least.append(0.0)
    return tuple(at_least[j] - at_least[j + 1] for j in range(len(at_least) - 1))


def true_tokens_per_step(cfg: MockConfig) -> float:
    """Expected tokens per decode step: 1 + expected accepted drafts (1 + sum_j prod_(i<=j) c_i; forced rates:
    1 + sum_j p_j); 1 for plain steps."""
    if cfg.num_speculative_tokens == 0:
        return 1.0
    return 1.0 + sum(j * p for j, p in enumerate(accepted_distribution(cfg)))


def expected_steps(cfg: MockConfig, tokens: int) -> float:
    """Expected decode steps to make `tokens` tokens, each step giving 1 + accepted (the last one cut to fit)."""
    dist = accepted_distribution(cfg) if cfg.num_speculative_tokens > 0 else (1.0,)
    e = [0.0] * (tokens + 1)  # e[m]: expected steps for m tokens still to make
    for m in range(1, tokens + 1):
        e[m] = 1.0 + sum(p * e[max(m - 1 - j, 0)] for j, p in enumerate(dist) if p > 0)
    return e[tokens]


def true_crossover_of_k(cfg: MockConfig, k: int, output_tokens: int | None = None) -> float | None:
    """The concurrency where speculating k tokens per step stops paying on this step-batched engine and content
    (`true_crossover` of its plain and its k arm)."""
    return true_crossover(with_k(cfg, 0), with_k(cfg, k), output_tokens)


def true_best_k(
    cfg: MockConfig, running: int, ks: Iterable[int] | None = None, output_tokens: int | None = None
) -> int:
    """The k with the lowest true TPOT at `running` requests in flight, 0 (plain steps) included; ties go to the
    smaller k. `ks` defaults to 0 up to the positions the rates give (forced: up to num_speculative_tokens)."""
    top = cfg.num_speculative_tokens if cfg.forced_acceptance_rates is not None else len(cfg.acceptance_rates)
    tpot = {k: true_tpot_s(with_k(cfg, k), running, output_tokens) for k in sorted(set(ks or range(top + 1)))}
    if any(t is None for t in tpot.values()):
        raise ValueError("true_best_k needs outputs of two tokens or more (TPOT is undefined for one)")
    return min(tpot, key=lambda k: (tpot[k], k))
