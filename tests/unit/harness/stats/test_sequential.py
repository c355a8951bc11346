"""Alpha spending across the looks of adaptive repeats: the looks' levels add up to at most 5 %."""

from __future__ import annotations

import itertools
import math

import pytest

from speculab.harness.stats.sequential import decided, look_alphas, spent


@pytest.mark.parametrize("kind", ["pocock", "obrien-fleming"])
def test_spending_goes_from_nothing_to_alpha_and_the_looks_add_up_to_it(kind):
    assert spent(0.0, 0.05, kind) == 0.0 and spent(1.0, 0.05, kind) == pytest.approx(0.05)
    ts = [i / 10 for i in range(11)]
    assert all(spent(a, 0.05, kind) <= spent(b, 0.05, kind) for a, b in itertools.pairwise(ts))
    for first, last in ((1, 6), (2, 6), (3, 3)):
        alphas = look_alphas(first, last, 0.05, kind)
        assert list(alphas) == list(range(first, last + 1))
        assert all(a > 0 for a in alphas.values())
        assert math.fsum(alphas.values()) == pytest.approx(0.05)  # the union bound: at most 5 % overall


def test_obrien_fleming_spends_little_early_and_pocock_evenly():
    obf, poc = look_alphas(1, 6, 0.05, "obrien-fleming"), look_alphas(1, 6, 0.05, "pocock")
    assert obf[1] < 1e-5 < poc[1] and obf[6] > poc[6]
    assert poc[1] == pytest.approx(0.05 * math.log(1 + (math.e - 1) / 6))
    with pytest.raises(ValueError, match="spending must be one of"):
        spent(0.5, 0.05, "bonferroni")
    with pytest.raises(ValueError, match="need 1 <= min <= max"):
        look_alphas(4, 3)


def test_what_counts_as_decided():
    assert decided("faster", "ok") and decided("slower", "ok") and decided("equivalent", "ok")
    assert not decided("inconclusive", "ok")  # more repeats narrow the interval
    assert decided("not enough paired data", "ok")  # more repeats add no prompts
    assert decided("errors", "errors")  # nor fix an error rate


def test_looks_at_whole_rounds_of_the_arms_order():
    from speculab.harness.stats.sequential import look_repeats

    assert look_repeats(1, 6, every=2) == [2, 4, 6]  # launch mode, two arms: after each ABBA pair
    assert look_repeats(1, 5, every=2) == [2, 4, 5]  # and always after the last
    assert look_repeats(3, 6, every=4) == [4, 6]
    alphas = look_alphas(1, 6, every=2)
    assert list(alphas) == [2, 4, 6] and math.fsum(alphas.values()) == pytest.approx(0.05)
