"""Speculation that adapts to load: how many tokens to draft this step (0 = plain decoding), per step.

Leviathan et al.'s what-if, per step. With conditional per-position acceptance a_1 .. a_K (a_i = P(draft i is
accepted | drafts 1 .. i-1 were), a missing draft counting as a rejection), a row expects

    E(k) = 1 + sum_{j=1..k} prod_{i=1..j} a_i          tokens from a step with k drafts (E(0) = 1)

and the step costs the target's forward over the batch's tokens plus the proposer's k forwards:

    cost(B, k) = target(B * (1 + k)) + k * proposer(B)     (rows are padded to the longest draft)

The policy picks the k in 0..K with the highest B * E(k) / cost(B, k). The a_i are exponential moving averages of
the verifier's decisions (recent text, not the whole history). Costs are measured, not modelled: the engine times
the target's forward at a grid of batch shapes when it starts (`StepCosts.calibrate`), and every step's own
forward and proposer time refine the estimate at the batch tokens it ran (also an EMA: the machine's speed drifts).
Batch tokens between measured points are interpolated linearly, beyond them extrapolated from the last two.
The proposer's cost per draft is learnt online per batch size (unknown = free, so it gets tried and measured).

When one k has won `explore_every` steps in a row, one step runs at another k (each in turn), so that the costs
and acceptances that only that k's steps measure stay fresh: stale estimates cannot lock a k in or out for good.
Choosing k never changes what is emitted: every k is verified exactly; only the speed changes.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class AdaptiveConfig:
    """Policy settings (the speculative config's "adaptive": true uses the defaults)."""

    prior_acceptance: float = 0.5  # a_i before any evidence, worth `prior_weight` observations
    prior_weight: float = 2.0
    decay: float = 0.98  # per observation: an estimate remembers roughly the last 1 / (1 - decay) = 50 rows
    cost_ema: float = 0.2  # weight of a new timing in the cost estimate at its batch size
    explore_every: int = 32


def _ema(old: float | None, new: float, weight: float) -> float:
    return new if old is None else (1 - weight) * old + weight * new


def _interpolate(table: dict[int, float], x: int) -> float | None:
    """Piecewise-linear in x through the measured points; flat below the first, linear beyond the last two."""
    if not table:
        return None
    if x in table:
        return table[x]
    keys = sorted(table)
    i = bisect.bisect_left(keys, x)
    if i == 0:
        return table[keys[0]]
    if i == len(keys):
        if len(keys) == 1:
            return table[keys[0]] * x / keys[0]  # proportional: never optimistic about an unmeasured size
        x0, x1 = keys[-2], keys[-1]
        slope = max(0.0, (table[x1] - table[x0]) / (x1 - x0))
        return table[x1] + slope * (x - x1)
    x0, x1 = keys[i - 1], keys[i]
    return table[x0] + (table[x1] - table[x0]) * (x - x0) / (x1 - x0)


@dataclass
class StepCosts:
    """Seconds per target forward by batch tokens, and per proposer draft by batch rows (EMAs of measurements)."""

    ema: float = 0.2
    target_s: dict[int, float] = field(default_factory=dict)  # batch tokens -> seconds per target forward
    draft_s: dict[int, float] = field(default_factory=dict)  # batch rows -> proposer seconds per draft position

    def observe_target(self, batch_tokens: int, seconds: float) -> None:
        self.target_s[batch_tokens] = _ema(self.target_s.get(batch_tokens), seconds, self.ema)

    def observe_proposer(self, rows: int, k: int, seconds: float) -> None:
        if k > 0:
            self.draft_s[rows] = _ema(self.draft_s.get(rows), seconds / k, self.ema)

    def target(self, batch_tokens: int) -> float | None:
        return _interpolate(self.target_s, batch_tokens)

    def proposer(self, rows: int) -> float:
        return _interpolate(self.draft_s, rows) or 0.0

    def calibrate(
        self, time_forward: Callable[[int, int], float], max_rows: int, max_width: int, repeats: int = 3
    ) -> None:
        """Time target forwards of `rows` x `width` tokens on a grid (median of `repeats`, after one warm-up)."""
        rows = sorted({1, max_rows, *(2**i for i in range(max_rows.bit_length()) if 2**i <= max_rows)})
        widths = sorted(
            {*range(1, min(max_width, 5) + 1), max_width, *(2**i + 1 for i in range(6) if 2**i < max_width)}
        )
        seen: dict[int, list[float]] = {}
        for b in rows:
            time_forward(b, 1)  # warm-up: the first forward at a shape pays allocation
            for w in widths:
                seen.setdefault(b * w, []).append(statistics.median(time_forward(b, w) for _ in range(repeats)))
        self.target_s = {t: statistics.mean(v) for t, v in seen.items()}


@dataclass
class Acceptance:
    """Per-position EMAs of the verifier's decisions: how often draft i is accepted once the row reaches it."""

    k: int
    prior: float = 0.5
    prior_weight: float = 2.0
    decay: float = 0.98
    reached: list[float] = field(default_factory=list)
    accepted: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.reached = [self.prior_weight] * self.k
        self.accepted = [self.prior_weight * self.prior] * self.k

    def observe(self, asked: Sequence[int], accepted: Sequence[int]) -> None:
        """One verification step: per row, the drafts it was asked for and how many were accepted.

        A row reaches position i when asked for more than i drafts and its first i were accepted; a draft the
        proposer did not produce (prompt lookup found a shorter match) counts as rejected there.
        """
        for i in range(self.k):
            reach = [acc for a, acc in zip(asked, accepted, strict=True) if a > i and acc >= i]
            if not reach:
                continue
            g = self.decay ** len(reach)
            self.reached[i] = g * self.reached[i] + len(reach)
            self.accepted[i] = g * self.accepted[i] + sum(1 for acc in reach if acc > i)

    def rate(self, i: int) -> float:
        """a_{i+1}: P(draft at 0-based position i accepted | the ones before were)."""
        return self.accepted[i] / self.reached[i]

    def expected_tokens(self, k: int) -> float:
        """E(k) = 1 + sum_j prod_{i<=j} a_i: tokens a row emits from a step with k drafts."""
        total, run = 1.0, 1.0
        for i in range(k):
            run *= self.rate(i)
            total += run
        return total


class AdaptivePolicy:
    """Chooses k per step from acceptance EMAs and measured costs; exact whatever it chooses."""

    def __init__(self, k_max: int, cfg: AdaptiveConfig = AdaptiveConfig()):
        self.k_max = k_max
        self.cfg = cfg
        self.acceptance = Acceptance(k_max, cfg.prior_acceptance, cfg.prior_weight, cfg.decay)
        self.costs = StepCosts(ema=cfg.cost_ema)
        self._last, self._streak, self._explored = -1, 0, 0

    def rates(self, rows: int) -> list[float]:
        """Expected tokens per second [K+1] for each k at this batch size (0 where costs are unknown)."""
        out = []
        for k in range(self.k_max + 1):
            target = self.costs.target(rows * (1 + k))  # rows are padded to the longest draft: B x (1 + k) tokens
            if target is None:
                return []
            cost = target + k * self.costs.proposer(rows)
            out.append(rows * self.acceptance.expected_tokens(k) / cost if cost > 0 else 0.0)
        return out

    def choose(self, rows: int) -> int:
        """k for a decode step of `rows` requests: the best expected throughput, with rare exploration."""
        rates = self.rates(rows)
        if not rates:
            return self.k_max  # nothing measured yet: speculate, and measure
        k = max(range(len(rates)), key=rates.__getitem__)
        self._streak = self._streak + 1 if k == self._last else 1
        self._last = k
        if self._streak >= self.cfg.explore_every and self.k_max > 0:
            # The same k for a long run: try another once, in turn (k = 0 first when speculating), so that the
            # costs and acceptances only its steps measure stay fresh.
            self._streak = 0
            others = [j for j in range(self.k_max + 1) if j != k]
            k = others[self._explored % len(others)]
            self._explored += 1
        return k

    def observe(self, asked: Sequence[int], accepted: Sequence[int]) -> None:
        self.acceptance.observe(asked, accepted)
