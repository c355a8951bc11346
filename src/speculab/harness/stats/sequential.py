"""Adaptive repeats without inflating false positives: alpha spending across looks.

`repeats: {min: 1, max: 6, until: decided}` looks at the data after each repeat from `min` on and stops once every
candidate's verdict at every load is decided. Testing at 5% at every look would call identical arms different far
more often than 5% (each look is another chance). So each look j gets its own level alpha_j, the increment of a
spending function alpha(t) at the information fraction t_j = repeats_j / max:

    Pocock-type (default):      alpha(t) = alpha * ln(1 + (e - 1) t)
    O'Brien-Fleming-type:       alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t))   (spends little early)

and alpha_j = alpha(t_j) - alpha(t_{j-1}) (t before the first look: 0). Whatever the correlation between looks, the
chance of any false "faster"/"slower" is at most sum(alpha_j) = alpha(1) = alpha (the union bound): a valid, if
conservative, group-sequential design. The verdict reported is the last look's, at that look's level. "No
the look's interval against the margin decides all three answers (analysis.comparison.margin.decide): faster or
slower beyond the margin, or equivalent (within +-margin). Each is an error only if the look's interval misses the
truth, so the union bound covers a false "equivalent" as it covers a false "faster": at most alpha over the whole
design. Inconclusive continues. bench/a_vs_a_adaptive.py measures the false-positive rate and the requests saved
against a fixed design.
"""

from __future__ import annotations

import math

import scipy

from speculab.harness.stats import ALPHA

SPENDING = ("pocock", "obrien-fleming")


def spent(t: float, alpha: float = ALPHA, kind: str = "pocock") -> float:
    """alpha(t): the error spent by information fraction t in [0, 1]."""
    if not 0 <= t <= 1:
        raise ValueError(f"information fraction must be in [0, 1], got {t}")
    if t == 0:
        return 0.0
    if kind == "pocock":
        return alpha * math.log(1 + (math.e - 1) * t)
    if kind == "obrien-fleming":
        z = float(scipy.special.ndtri(1 - alpha / 2))
        return float(2 - 2 * scipy.special.ndtr(z / math.sqrt(t)))
    raise ValueError(f"spending must be one of {', '.join(SPENDING)}, got {kind!r}")


def look_repeats(first: int, last: int, every: int = 1) -> list[int]:
    """The repeats after which to look: from `first` on, at whole rounds of `every` repeats (a round keeps the arms'
    order balanced: ABBA is two repeats in launch mode), and always after `last`."""
    if not 1 <= first <= last or every < 1:
        raise ValueError(f"need 1 <= min <= max and a round >= 1, got {first}, {last}, {every}")
    return [r for r in range(first, last + 1) if r % every == 0 or r == last]


def look_alphas(first: int, last: int, alpha: float = ALPHA, kind: str = "pocock", every: int = 1) -> dict[int, float]:
    """Repeat number -> the level of the look after it, for the looks of `look_repeats` (last = max)."""
    out, before = {}, 0.0
    for r in look_repeats(first, last, every):
        now = spent(r / last, alpha, kind)
        out[r] = now - before
        before = now
    return out


def decided(decision: str, gate: str) -> bool:
    """Is one comparison settled? Faster, slower or equivalent at the look's level (analysis.comparison.margin.decide,
    against the margin); or a state more repeats cannot change (a gate such as errors, or too few units: repeats add
    no prompts). Inconclusive goes on."""
    if gate != "ok" or decision == "not enough paired data":
        return True
    return decision in ("faster", "slower", "equivalent")
