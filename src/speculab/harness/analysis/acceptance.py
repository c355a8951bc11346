"""Pure: the acceptance formulas, vLLM's definitions, the one place they live.

A draft is one request's verification step. Acceptance rate = accepted / drafted tokens; mean acceptance length =
1 + accepted / drafts (the target's own token of each step included). Engines that report no steps (llama.cpp's
per-response timings) give the output tokens per target step instead: every step after the prefill yields one target
token plus its accepted drafts, so n - 1 tokens took n - 1 - accepted steps. Server counters
(`harness.servers.acceptance`), per-response fields (`analysis.request_acceptance`) and the sums over repeats
(`harness.verdict`) all call these.
"""

from __future__ import annotations


def acceptance_rate(accepted: float, draft_tokens: float | None) -> float | None:
    """Accepted / drafted tokens; None when nothing was drafted (0/0) or the drafted count is unknown."""
    return accepted / draft_tokens if draft_tokens is not None and draft_tokens > 0 else None


def acceptance_length(accepted: float, drafts: float | None) -> float | None:
    """Tokens per verification step, bonus token included: 1 + accepted / drafts; None without steps."""
    return 1.0 + accepted / drafts if drafts is not None and drafts > 0 else None


def tokens_per_step(output_tokens: float, accepted: float) -> float | None:
    """Output tokens per target step when the steps are not reported: (n - 1) / (n - 1 - accepted), the first of
    the n tokens coming from the prefill; None when no step is left to divide by."""
    n = output_tokens - 1
    steps = n - accepted
    return n / steps if n > 0 and steps > 0 else None
