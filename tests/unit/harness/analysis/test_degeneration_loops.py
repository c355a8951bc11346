"""One output's degeneration: the loop at its tail (period, span, strength, its text), repeated n-grams, the units
without logprobs, and what is not a loop (rhetoric, a closing run of braces, a list, JSON records of one shape)."""

from __future__ import annotations

import json
import random

import pytest

from speculab.harness.analysis.degeneration.loops import (
    LoopRules,
    degeneration_of,
    output_units,
    repeated_ngram_share,
    tail_loop,
)

WORDS = [f"w{i}" for i in range(200)]


def prose(n: int, seed: int = 0) -> list[str]:
    """n words drawn from 200: no loop, next to no repeated 8-gram."""
    rng = random.Random(seed)
    return [rng.choice(WORDS) for _ in range(n)]


def looping(n: int, after: int, period: int, seed: int = 0) -> list[str]:
    """n words that fall into a loop after `after`: the `period` words after them repeated to the end (the mock's)."""
    fresh = prose(after + period, seed)
    return (fresh[:after] + [fresh[after + (i - after) % period] for i in range(after, n)])[:n]


def test_a_loop_at_the_tail_has_its_period_span_strength_and_text():
    units = looping(512, 64, 8)
    d = degeneration_of(" ".join(units))
    assert d.unit == "approx" and d.units == 512 and d.judged and d.degenerate
    assert d.period == 8  # the shortest: the loop is periodic at 16, 24, ... too
    assert d.loop_units >= 448 and d.repeats >= 56  # from token 64 on (one more when a unit before matches by chance)
    assert d.strength == pytest.approx(d.loop_units / 512) and d.strength >= 0.875
    assert d.cycle.split() == units[-d.loop_units :][:8]
    assert d.repeated_ngrams > 0.8  # a loop over most of the output repeats most of its n-grams


def test_prose_is_clean():
    d = degeneration_of(" ".join(prose(512)))
    assert (d.period, d.loop_units, d.cycle, d.strength) == (0, 0, "", 0.0)
    assert d.repeated_ngrams < 0.01 and d.judged and not d.degenerate


def test_tail_loop_needs_its_repeats_and_its_span():
    three = prose(100) + ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"] * 3
    assert tail_loop(three, 4, 32) == (0, 0)  # said three times: rhetoric, a refrain
    assert tail_loop(three, 3, 32) == (12, 36)
    braces = prose(100) + ["}"] * 6
    assert tail_loop(braces, 4, 32) == (0, 0)  # closing blocks repeats one unit six times, over 6 units
    assert tail_loop(braces, 4, 6) == (1, 6)
    everything = ["x"] * 40
    assert tail_loop(everything, 4, 32) == (1, 40)  # the loop from the first unit: strength 1


def test_a_late_loop_is_weak_but_a_loop():
    d = degeneration_of(" ".join(looping(512, 472, 8)))
    assert d.period == 8 and d.degenerate and d.strength < 0.1  # 40 units of 512, five repeats


def test_outputs_too_short_are_not_judged():
    d = degeneration_of(" ".join(["la"] * 20))
    assert d.period == 0 and not d.judged and not d.degenerate  # 20 units: below min_loop_units as well
    short = degeneration_of(" ".join(["la"] * 40), rules=LoopRules(min_units=64))
    assert short.period == 1 and not short.judged and not short.degenerate


def test_a_loop_with_variations_is_caught_by_its_repeated_ngrams():
    rng = random.Random(1)
    units = looping(512, 32, 12)
    for i in range(40, 500, 37):  # one unit in 37 varied, the last just before the end: no exact loop at the tail
        units[i] = rng.choice(WORDS)
    units[-2] = "variant"
    d = degeneration_of(" ".join(units))
    assert d.period == 0 and d.repeated_ngrams >= 0.5 and d.degenerate


def test_structured_output_of_one_shape_is_not_degenerate():
    rng = random.Random(2)
    cities = ["Paris", "Lyon", "Rome", "Oslo", "Lima", "Kyiv"]
    records = [
        {"name": f"person{rng.randrange(999)}", "age": rng.randrange(90), "city": rng.choice(cities)} for _ in range(20)
    ]
    d = degeneration_of(json.dumps(records, indent=2))
    assert d.period == 0 and d.repeated_ngrams < 0.5 and not d.degenerate
    numbered = "\n".join(f"{i}. {' '.join(prose(8, seed=i))}" for i in range(1, 41))
    assert not degeneration_of(numbered).degenerate


def test_units_are_the_engines_tokens_where_given_else_words_and_punctuation():
    assert output_units("Hello, world!") == ("approx", ["Hello", ",", "world", "!"])
    assert output_units("ignored", ["He", "llo"]) == ("token", ["He", "llo"])
    # a script written without spaces: each character is a unit, and a loop of sentences shows
    assert output_units("猫が好き。") == ("approx", ["猫", "が", "好", "き", "。"])
    looped = "今日は良い天気です。" + "猫が好きです。" * 12
    d = degeneration_of(looped)
    assert d.period == 7 and d.degenerate and d.cycle.replace(" ", "") in "猫が好きです。" * 2
    # a run of word characters no spaced language has: its characters, so "aaaa..." is a loop too
    assert output_units("x" * 21) == ("approx", ["x"] * 21)
    assert output_units("Donaudampfschiff") == ("approx", ["Donaudampfschiff"])
    # in tokens, the period counts tokens: "ab " is two of them
    toks = [f"t{i} " for i in range(20)] + ["a", "b "] * 20
    d = degeneration_of("".join(toks), toks)
    assert d.unit == "token" and d.period == 2 and d.cycle == "ab "


def test_repeated_ngram_share():
    assert repeated_ngram_share(["a", "b", "c"], 4) == 0.0
    assert repeated_ngram_share(list("abcdabcd"), 4) == pytest.approx(1 - 4 / 5)
    assert repeated_ngram_share(list("abcdefgh"), 4) == 0.0
