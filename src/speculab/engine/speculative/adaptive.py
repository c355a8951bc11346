"""Speculation that adapts to load: how many tokens to draft this step (0 = plain decoding), per step.

Leviathan et al.'s what-if, per step. With conditional per-position acceptance a_1 .. a_K (a_i = P(draft i is
accepted | drafts 1 .. i-1 were), a missing draft counting as a rejection), a row expects

    E(k) = 1 + sum_{j=1..k} prod_{i=1..j} a_i          tokens from a step with k drafts (E(0) = 1)

and the step costs the target's forward (and verification) over the batch's tokens plus the proposer's k forwards:

    cost(B, k) = target(B * (1 + k)) + k * proposer(B)     (rows are padded to the longest draft; a step in which
                                                          no row proposes anything costs target(B))

The policy picks the k in 0..K with the highest B * E(k) / cost(B, k), but k > 0 only when that beats k = 0 (plain
decoding) by `min_gain` (15%): the estimates are noisy, and the risks are not symmetric (a step without drafts is
never slower than plain decoding; a bad speculative step is). The a_i are exponential moving averages of
the verifier's decisions (recent text, not the whole history). Costs are measured, not modelled: the engine times
the target's forward at a grid of batch shapes when it starts (`StepCosts.calibrate`), and every step's own
forward and proposer time join the estimate at the batch tokens it ran: the median of the last 15 timings per size
(the machine's speed drifts, and on a shared machine it spikes), kept non-decreasing in batch tokens. Batch tokens
between measured points are interpolated linearly, beyond them extrapolated from the last two.
The proposer's cost per draft is learnt online per batch size (unknown = free, so it gets tried and measured),
without the time it spent catching up on a backlog (a new prompt, steps that did not speculate: `Proposal.backlog_s`),
which speculation pays whenever it resumes and which would otherwise make every new request look like a dear draft.

When one k has won `explore_every` steps in a row, one step runs at a neighbouring k, so that the costs and
acceptances only that k's steps measure stay fresh: stale estimates cannot lock a k in or out for good. Each further
try in the same run waits twice as long, and no try runs while the tries so far cost more than `explore_budget`
(2%) of all the steps' time beyond the steps they replaced, since a try can be dear (an EAGLE head that skipped many
steps catches up over all of them at once). Shapes the steps do not run keep their calibrated price scaled by the
drift of the shapes that do (`StepCosts.drift`): the context grows during a run, and a start-up price measured
with an empty KV cache would make an unvisited wide verification look cheap for good.
Choosing k never changes what is emitted: every k is verified exactly; only the speed changes.
"""

from __future__ import annotations

import bisect
import statistics
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class AdaptiveConfig:
    """Policy settings (the speculative config's "adaptive": true uses the defaults)."""

    prior_acceptance: float = 0.5  # a_1 before any evidence (a_i leans on a_{i-1}), worth `prior_weight` observations
    prior_weight: float = 2.0
    decay: float = 0.98  # per observation: an estimate remembers roughly the last 1 / (1 - decay) = 50 rows
    cost_window: int = 15  # timings per batch size whose median is the cost estimate
    explore_every: int = 32
    # Tries of a k the estimates did not choose may cost at most this share of all the steps' time: a try can be
    # dear (an EAGLE head that skipped many steps catches up over all of them at once), and at a load where
    # speculation does not pay, tries are all the policy loses against plain decoding.
    explore_budget: float = 0.02
    # Speculate only when the estimate beats plain decoding by this much: the estimates are noisy, and the risks are
    # not symmetric (a step that skips speculation is never slower than plain; a bad speculative step is).
    min_gain: float = 0.15


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


CATCH_UP_WIDTH = 64  # entries per row in the catch-up calibration: about what a try after 32+ skipped steps meets


def calibration_rows(max_rows: int) -> list[int]:
    """The batch sizes calibration times: 1, the powers of two below max_rows, and max_rows."""
    return sorted({1, max_rows, *(2**i for i in range(max_rows.bit_length()) if 2**i <= max_rows)})


@dataclass
class StepCosts:
    """Seconds per target forward by batch tokens, and per proposer draft by batch rows: the median of each size's
    last `window` measurements (a shared machine's load spikes move a median far less than a mean), made
    non-decreasing in batch tokens (a bigger batch never costs less; noise otherwise says it sometimes does)."""

    window: int = 15
    target_obs: dict[int, deque[float]] = field(default_factory=dict)  # batch tokens -> recent seconds
    draft_obs: dict[int, deque[float]] = field(default_factory=dict)  # batch rows -> recent seconds per draft
    # What `calibrate` measured at start, kept apart from the steps' own timings: a shape the steps never run (a
    # wide verification while the policy skips) would otherwise keep its start-up price, measured with an empty
    # KV cache, while the shapes that run grow dearer with the context, and look cheap next to them for good.
    calibrated: dict[int, float] = field(default_factory=dict)
    # Seconds per entry a proposer spends catching up (a prompt, skipped steps) before it can draft: the median of
    # recent catch-ups, per entry (calibrated at start for EAGLE; none: unknown, counted as free).
    catch_up_obs: deque[float] = field(default_factory=lambda: deque(maxlen=15))
    _tables: tuple[dict[int, float], dict[int, float]] | None = None

    def _push(self, table: dict[int, deque[float]], key: int, seconds: float) -> None:
        table.setdefault(key, deque(maxlen=self.window)).append(seconds)
        self._tables = None

    def observe_target(self, batch_tokens: int, seconds: float) -> None:
        self._push(self.target_obs, batch_tokens, seconds)

    def observe_proposer(self, rows: int, k: int, seconds: float) -> None:
        if k > 0:
            self._push(self.draft_obs, rows, seconds / k)

    def observe_catch_up(self, entries: int, seconds: float) -> None:
        if entries > 0:
            self.catch_up_obs.append(seconds / entries)

    def catch_up(self, entries: int) -> float:
        """Estimated seconds to catch up over `entries` entries (0 when nothing is pending or nothing is known)."""
        return entries * statistics.median(self.catch_up_obs) if entries and self.catch_up_obs else 0.0

    def drift(self) -> float:
        """How much dearer the steps run now than calibration said for the same shapes: the median, over the
        shapes both measured, of (recent median / calibrated); 1 when none is shared."""
        shared = [statistics.median(v) / self.calibrated[t] for t, v in self.target_obs.items() if t in self.calibrated]
        return statistics.median(shared) if shared else 1.0

    def _medians(self) -> tuple[dict[int, float], dict[int, float]]:
        if self._tables is None:
            # a shape's own recent timings where the steps ran it; elsewhere its calibrated price, scaled by how far
            # the shapes that do run have drifted from theirs (context length and machine speed move all shapes)
            scale = self.drift()
            merged = {t: c * scale for t, c in self.calibrated.items()}
            merged.update({t: statistics.median(v) for t, v in self.target_obs.items()})
            target, running = {}, 0.0
            for t in sorted(merged):
                running = max(running, merged[t])
                target[t] = running
            draft = {b: statistics.median(v) for b, v in self.draft_obs.items()}
            self._tables = (target, draft)
        return self._tables

    def target(self, batch_tokens: int) -> float | None:
        return _interpolate(self._medians()[0], batch_tokens)

    def proposer(self, rows: int) -> float:
        return _interpolate(self._medians()[1], rows) or 0.0

    def calibrate(
        self, time_forward: Callable[[int, int], float], max_rows: int, max_width: int, rounds: int = 5
    ) -> None:
        """Time target forwards of `rows` x `width` tokens on a grid, `rounds` passes over the whole grid (so that
        a slow moment hits every shape alike, and each shape's median discards it), after one warm-up each."""
        rows = calibration_rows(max_rows)
        widths = sorted(
            {*range(1, min(max_width, 5) + 1), max_width, *(2**i + 1 for i in range(6) if 2**i < max_width)}
        )
        for b in rows:
            time_forward(b, 1)  # warm-up: the first forward at a shape pays allocation
        timings: dict[int, list[float]] = {}
        for _ in range(rounds):
            for b in rows:
                for w in widths:
                    timings.setdefault(b * w, []).append(time_forward(b, w))
        self.calibrated.update({t: statistics.median(v) for t, v in timings.items()})
        self._tables = None


@dataclass
class Acceptance:
    """Per-position EMAs of the verifier's decisions: how often draft i is accepted once the row reaches it.

    A position with little evidence leans on the one before it (`prior_weight` pseudo-observations of its rate;
    the first position leans on `prior`): acceptance changes slowly with position, so after a few steps at k = 1
    the policy can already judge k = 4 instead of creeping up one position at a time.
    """

    k: int
    prior: float = 0.5
    prior_weight: float = 2.0
    decay: float = 0.98
    reached: list[float] = field(default_factory=list)
    accepted: list[float] = field(default_factory=list)
    asked_rows: float = 0.0  # rows asked for drafts ...
    proposing_rows: float = 0.0  # ... and those that proposed at least one (prompt lookup often finds nothing)

    def __post_init__(self) -> None:
        self.reached, self.accepted = [0.0] * self.k, [0.0] * self.k

    def observe(self, asked: Sequence[int], accepted: Sequence[int], proposed: Sequence[int] | None = None) -> None:
        """One verification step: per row, the drafts it was asked for, how many were accepted (and proposed).

        A row reaches position i when asked for more than i drafts and its first i were accepted; a draft the
        proposer did not produce (prompt lookup found a shorter match) counts as rejected there.
        """
        if proposed is not None:
            rows = [(a, p) for a, p in zip(asked, proposed, strict=True) if a > 0]
            g = self.decay ** len(rows)
            self.asked_rows = g * self.asked_rows + len(rows)
            self.proposing_rows = g * self.proposing_rows + sum(1 for _, p in rows if p > 0)
        for i in range(self.k):
            reach = [acc for a, acc in zip(asked, accepted, strict=True) if a > i and acc >= i]
            if not reach:
                continue
            g = self.decay ** len(reach)
            self.reached[i] = g * self.reached[i] + len(reach)
            self.accepted[i] = g * self.accepted[i] + sum(1 for acc in reach if acc > i)

    def proposing(self) -> float:
        """P(a row asked for drafts proposes at least one); 1 until measured."""
        return (self.proposing_rows + self.prior_weight) / (self.asked_rows + self.prior_weight)

    def rates(self) -> list[float]:
        """a_1 .. a_K: P(draft at 0-based position i accepted | the ones before were), each shrunk toward the
        position before it (the first toward the prior)."""
        out, lean = [], self.prior
        for reached, accepted in zip(self.reached, self.accepted, strict=True):
            lean = (accepted + self.prior_weight * lean) / (reached + self.prior_weight)
            out.append(lean)
        return out

    def rate(self, i: int) -> float:
        return self.rates()[i]

    def expected_tokens(self, k: int) -> float:
        """E(k) = 1 + sum_j prod_{i<=j} a_i: tokens a row emits from a step with k drafts."""
        total, run = 1.0, 1.0
        for a in self.rates()[:k]:
            run *= a
            total += run
        return total


class AdaptivePolicy:
    """Chooses k per step from acceptance EMAs and measured costs; exact whatever it chooses."""

    def __init__(self, k_max: int, cfg: AdaptiveConfig = AdaptiveConfig()):
        self.k_max = k_max
        self.cfg = cfg
        self.acceptance = Acceptance(k_max, cfg.prior_acceptance, cfg.prior_weight, cfg.decay)
        self.costs = StepCosts(window=cfg.cost_window)
        self._last, self._streak, self._explored, self._patience = -1, 0, 0, cfg.explore_every
        self.elapsed_s = 0.0  # every step's time, proposer (catch-up included) and target
        self.explore_extra_s = 0.0  # what tries cost beyond the estimate of the step they replaced
        self._try_instead_of: float | None = None  # the replaced step's estimated seconds, while a try runs

    def rates(self, rows: int) -> list[float]:
        """Expected tokens per second [K+1] for each k at this batch size (0 where costs are unknown)."""
        out = []
        plain = self.costs.target(rows)
        # A step in which no row proposes anything runs as plain decoding (prompt lookup's misses cost nothing)
        none_propose = (1 - self.acceptance.proposing()) ** rows
        for k in range(self.k_max + 1):
            target = self.costs.target(rows * (1 + k))  # rows are padded to the longest draft: B x (1 + k) tokens
            if target is None or plain is None:
                return []
            if k:
                target = (1 - none_propose) * target + none_propose * plain
            cost = target + k * self.costs.proposer(rows)
            out.append(rows * self.acceptance.expected_tokens(k) / cost if cost > 0 else 0.0)
        return out

    def choose(self, rows: int, resume_s: float = 0.0) -> int:
        """k for a decode step of `rows` requests: the best expected throughput, with rare exploration.
        `resume_s`: what drafting this step would first cost in catch-up (the proposer's backlog), which a try
        must fit in the exploration budget along with what the tries before it cost."""
        rates = self.rates(rows)
        if not rates:
            return min(1, self.k_max)  # nothing measured yet: speculate a little, and measure
        k = max(range(len(rates)), key=rates.__getitem__)
        if rates[k] < (1 + self.cfg.min_gain) * rates[0]:
            k = 0
        if k > 1 and not self.costs.draft_obs:
            k = 1  # the proposer's cost is still unknown (counted as free): learn it with one draft, not k
        if k != self._last:
            self._last, self._streak, self._patience = k, 0, self.cfg.explore_every
        self._streak += 1
        within_budget = self.explore_extra_s + resume_s <= self.cfg.explore_budget * self.elapsed_s
        if self._streak >= self._patience and self.k_max > 0 and within_budget:
            # The same k for a long run: try a neighbour once (alternately below and above), so that the costs and
            # acceptances only its steps measure stay fresh; each further try waits twice as long, and none runs
            # while the tries so far have cost more than `explore_budget` of the time (a try can be dear: after
            # many steps without drafts an EAGLE head catches up over all of them at once).
            self._streak, self._patience = 0, 2 * self._patience
            neighbours = [j for j in (k - 1, k + 1) if 0 <= j <= self.k_max]
            self._explored += 1
            self._try_instead_of = self.step_seconds(rows, k)
            return neighbours[self._explored % len(neighbours)]
        return k

    def step_seconds(self, rows: int, k: int) -> float:
        """The estimated seconds of a step of `rows` rows at k (0 where the target's cost is not known yet)."""
        target = self.costs.target(rows * (1 + k)) or 0.0
        return target + k * self.costs.proposer(rows)

    def step_done(self, seconds: float) -> None:
        """A step's whole time (proposer with its catch-up, target, verification), for the exploration budget."""
        self.elapsed_s += seconds
        if self._try_instead_of is not None:
            self.explore_extra_s += max(0.0, seconds - self._try_instead_of)
            self._try_instead_of = None

    def observe(self, asked: Sequence[int], accepted: Sequence[int], proposed: Sequence[int] | None = None) -> None:
        self.acceptance.observe(asked, accepted, proposed)
