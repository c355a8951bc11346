"""One output's degeneration: the loop at its tail (the shortest period that repeats to its end) and the share of its
n-grams that repeat earlier ones. docs/metrics.md ("Degeneration") has the definitions and why each threshold.

Units. Where the record has logprobs, its tokens are the engine's own, and a period-8 loop is 8 of them. Without, the
text is cut as `workload.items.approx_tokens` counts a prompt (each \\w+ run and each punctuation mark: speculab
assumes no tokenizer), with two changes. Each character of a script written without spaces (Chinese, Japanese, Thai)
is a unit: a clause of such text would otherwise be one unit, and a page of it too few units to judge. And a run of
word characters longer than LONG_RUN is split into its characters: no spaced language has words that long, and as one
unit a run like "aaaa..." hides its loop. A loop of tokens is a loop of these units as long as its cycle holds a
space, a punctuation mark or such a character, where units end: a repeated phrase, line or paragraph does.

The loop at the tail. For a period p, the periodic tail is the longest suffix in which every unit equals the one p
before it, with the p units it repeats (the cycle's first occurrence). The loop is the shortest p whose periodic tail
repeats its cycle at least `min_repeats` times and spans at least `min_loop_units` units (a period-8 loop is periodic
at 16 and 24 too; its own period is found first). Its strength is the share of the output the loop spans, from where
it starts to the end: 1.0 loops from the first unit; a loop that began just before max_tokens cut it is weak, but it
is a loop the output was not leaving.

Repeated n-grams: 1 - distinct n-grams / all n-grams (Welleck et al. 2019's seq-rep-n, "Neural text degeneration with
unlikelihood training"), here with n = 8. It sees repetition that is not an exact loop to the end: a loop with
variations (sampling at temperature > 0), a passage said again and again. Why 8 and not their 4: structured output
repeats short n-grams legitimately. On speculab's own texts (the built-in sets' prompts and parts), 4-grams repeat at
up to 0.03 in prose, 0.18 in code and 0.66 in pretty-printed JSON records of one shape; 8-grams at 0.00, 0.09 and
0.40, while a loop over 87 % of an output gives 0.87 at either n, and the same loop with 5 % of its units varied 0.64.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# scripts written without spaces, one unit per character: hiragana and katakana, CJK ideographs (extension A, unified,
# compatibility), Thai
_UNSPACED = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0e7f"
_UNIT = re.compile(rf"[{_UNSPACED}]|[^\W{_UNSPACED}]+|[^\w\s]")
LONG_RUN = 20  # characters: a longer \w+ run is not a word of a spaced language; its characters are the units
CYCLE_CHARS = 80  # the loop's text kept for the report, at most


@dataclass(frozen=True, slots=True)
class LoopRules:
    """When an output is judged degenerate; units are tokens, or approximate ones (module docstring)."""

    min_units: int = 32  # shorter outputs are not judged: too short to tell a loop from a list or a closing "}}}}"
    min_repeats: int = 4  # a loop repeats its cycle at least this often: two or three repeats are rhetoric or a list
    min_loop_units: int = 32  # and spans at least this many units: "} } } }" closing a block is no loop
    ngram: int = 8  # n of the repeated n-grams (module docstring: why 8)
    # degenerate at or above this share of repeated n-grams: half of the output says again what it said before; prose,
    # code and JSON records of one shape stay below it (0.00, 0.09, 0.40 at n = 8), a loop over most of it does not
    repeated_ngrams_limit: float = 0.5


@dataclass(frozen=True, slots=True)
class Degeneration:
    """One output's loop and repetition; the report shows the period, strength and cycle of the degenerate ones."""

    unit: str  # "token" (the engine's, from logprobs) | "approx" (words and punctuation marks)
    units: int  # the output's length in them
    period: int  # the loop's period in units; 0: no loop at the tail
    loop_units: int  # units the loop spans, its first cycle included; 0 without a loop
    strength: float  # loop_units / units: the share of the output the loop spans
    repeated_ngrams: float  # 1 - distinct / all n-grams (LoopRules.ngram); 0.0 below n units
    cycle: str  # one period of the loop's text, clipped to CYCLE_CHARS ("" without a loop): model output, escape it
    judged: bool  # units >= LoopRules.min_units
    degenerate: bool  # judged, and a loop at the tail or repeated n-grams at or above the limit

    @property
    def repeats(self) -> float:
        """How many times the loop repeats its cycle (0.0 without a loop)."""
        return self.loop_units / self.period if self.period else 0.0


def output_units(text: str, tokens: Sequence[str] | None = None) -> tuple[str, list[str]]:
    """(unit, units) of one output: the engine's tokens when given, else words, punctuation marks and characters of
    unspaced scripts, a run of word characters longer than LONG_RUN split into its characters."""
    if tokens is not None:
        return "token", list(tokens)
    units: list[str] = []
    for u in _UNIT.findall(text):
        if len(u) > LONG_RUN:
            units.extend(u)
        else:
            units.append(u)
    return "approx", units


def tail_loop(units: Sequence[str], min_repeats: int, min_loop_units: int) -> tuple[int, int]:
    """(period, units spanned) of the shortest period whose periodic tail repeats at least `min_repeats` times and
    spans at least `min_loop_units` units; (0, 0) when none does."""
    n = len(units)
    for p in range(1, n // max(min_repeats, 1) + 1):
        i = n - 1
        while i >= p and units[i] == units[i - p]:  # O(1) for most p: a non-period fails at the last unit
            i -= 1
        span = n - 1 - i + p  # the suffix equal to the units p before it, and the cycle it repeats
        if span >= max(min_repeats * p, min_loop_units):
            return p, span
    return 0, 0


def repeated_ngram_share(units: Sequence[str], n: int) -> float:
    """1 - distinct n-grams / all n-grams; 0.0 when the output has fewer than n units."""
    grams = [tuple(units[i : i + n]) for i in range(len(units) - n + 1)]
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def degeneration_of(text: str, tokens: Sequence[str] | None = None, rules: LoopRules = LoopRules()) -> Degeneration:
    """One output's loop and repeated n-grams, and whether they make it degenerate under `rules`."""
    unit, units = output_units(text, tokens)
    n = len(units)
    period, span = tail_loop(units, rules.min_repeats, rules.min_loop_units)
    share = repeated_ngram_share(units, rules.ngram)
    judged = n >= rules.min_units
    start = n - span
    joiner = "" if unit == "token" else " "  # tokens carry their own spaces; approximate units lost theirs
    cycle = joiner.join(units[start : start + period])[:CYCLE_CHARS] if period else ""
    return Degeneration(
        unit=unit,
        units=n,
        period=period,
        loop_units=span,
        strength=span / n if n else 0.0,
        repeated_ngrams=share,
        cycle=cycle,
        judged=judged,
        degenerate=judged and (period > 0 or share >= rules.repeated_ngrams_limit),
    )
