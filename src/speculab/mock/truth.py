"""The true TPOT of a scripted mock at a given number of requests in flight, and the crossover of two mocks.

Why: a search for the load where speculation stops paying (issue 39) needs a server whose crossover is known
exactly, to check an estimate against. Two mocks run as the arms of an A/B script one: the baseline sends one
token per chunk, the candidate two (speculation's tokens per step) at the same `--gap-ms`, so it is 2x faster per
token at one stream; the candidate's `--decode-slowdown s` stretches its gaps by s per extra request in flight, so
its per-token time relative to the baseline's grows linearly, (1 + s (c - 1)) / 2, and crosses 1 at c = 1 + 1 / s.

These are the script's own rules (`script.chunk_sizes` and the decode rule in `server.py`), read with every
request of a level in flight for its whole life (`running` = c), which a closed loop at concurrency c keeps.
TPOT is the harness's: (E2E - TTFT) / (output tokens - 1), so only the gaps after the first chunk count.
"""

from __future__ import annotations

from speculab.mock.script import MockConfig, chunk_sizes


def true_tpot_s(cfg: MockConfig, running: int, output_tokens: int | None = None) -> float | None:
    """The mock's TPOT in seconds for a request of `output_tokens` (default: the mock's natural length) with
    `running` requests in flight throughout; None for a one-token answer (no TPOT)."""
    n = cfg.output_tokens if output_tokens is None else output_tokens
    if n < 2:
        return None
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
    changes sign at or above one stream. Each TPOT is a * (1 + s (c - 1)) with a its TPOT at one stream and s its
    `decode_slowdown_per_request`, so the crossing solves a linear equation in c."""
    a_b, a_c = true_tpot_s(baseline, 1, output_tokens), true_tpot_s(candidate, 1, output_tokens)
    if a_b is None or a_c is None:
        return None
    slope = a_b * baseline.decode_slowdown_per_request - a_c * candidate.decode_slowdown_per_request
    if slope == 0:  # parallel: one arm is faster at every load, or the two are equal at every load (no sign change)
        return None
    c = 1 + (a_c - a_b) / slope
    return c if c >= 1 else None
