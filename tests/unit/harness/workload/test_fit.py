"""workload.fit: items fitted to a context before the first request, the same way for every command."""

from __future__ import annotations

import pytest

from speculab.errors import UserError
from speculab.harness.records import RequestSpec
from speculab.harness.workload.fit import (
    FitConfig,
    context_from_cards,
    fit_from_manifest,
    fit_items,
    fit_warning,
    prompt_tokens,
    take,
    without,
)
from speculab.harness.workload.items import request_seed
from speculab.harness.workload.sources import load_workload
from speculab.report.phrases import warning_text


def fit_note(fit):
    """The fitting warning's words, as the report prints them (None: nothing changed)."""
    w = fit_warning(fit)
    return None if w is None else warning_text(w)


def _items(words: list[int], max_tokens: int | None = None) -> tuple[RequestSpec, ...]:
    return tuple(
        RequestSpec(i, prompt=" ".join(["w"] * n), prompt_id=f"p{i}", max_tokens=max_tokens, seed=request_seed(0, i))
        for i, n in enumerate(words)
    )


def _fit(pool, context, policy="skip", max_tokens=16, overrides=True, n=None, count=None):
    return fit_items(pool, context=context, policy=policy, max_tokens=max_tokens, overrides_items=overrides,
                     num_prompts=n, seed=0, count=count)  # fmt: skip


@pytest.mark.parametrize("spec", ["builtin:mixed", "builtin:chat"])
@pytest.mark.parametrize("n", [5, 64, 700])
def test_take_from_the_whole_set_is_what_the_loader_gives(spec: str, n: int) -> None:
    """Loading the whole set and taking n (cycling, conversations renamed ID#2) changes nothing when all fits."""
    assert take(load_workload(spec, seed=3).items, n, 3) == load_workload(spec, seed=3, num_prompts=n).items


def test_unknown_context_changes_nothing() -> None:
    pool = load_workload("builtin:mixed", seed=0).items
    fit = _fit(pool, None, n=24)
    assert fit.items == load_workload("builtin:mixed", seed=0, num_prompts=24).items
    assert not fit.changed and fit_note(fit) is None


def test_skip_leaves_out_what_cannot_fit_and_takes_the_next_ones() -> None:
    pool = _items([10, 400, 10, 400, 10])  # 400 words ~ 808 estimated tokens: no room in 512
    fit = _fit(pool, 512, n=7)
    assert fit.left_out == ("p1", "p3") and fit.pool == 5
    assert [it.prompt_id for it in fit.items] == ["p0", "p2", "p4", "p0", "p2", "p4", "p0"]
    assert [it.index for it in fit.items] == list(range(7))
    assert [it.seed for it in fit.items] == [request_seed(0, i) for i in range(7)]
    note = fit_note(fit)
    assert note is not None and "2 of 5 prompts were left out (p1, p3)" in note and "512-token context" in note


def test_a_conversation_is_left_out_whole() -> None:
    pool = load_workload("builtin:chat", seed=0).items
    fit = _fit(pool, 400, max_tokens=64, n=None)
    convs = {it.conversation_id for it in pool}
    assert fit.left_out and set(fit.left_out) <= convs
    assert not {it.conversation_id for it in fit.items} & set(fit.left_out)
    kept = [it for it in pool if it.conversation_id not in fit.left_out]
    assert [(it.conversation_id, it.turn) for it in fit.items] == [(it.conversation_id, it.turn) for it in kept]


def test_a_later_turn_counts_the_turns_and_answers_before_it() -> None:
    turns = tuple(RequestSpec(i, prompt=" ".join(["w"] * 50), prompt_id="c", conversation_id="c", turn=i + 1)
                  for i in range(3))  # fmt: skip
    # turn 3 is sent behind 2 x (108 + 64) tokens: 452, and asks for 64 more
    assert _fit(turns, 516, max_tokens=64).left_out == ()
    assert _fit((*turns, *_items([10])), 515, max_tokens=64).left_out == ("c",)


def test_cap_lowers_max_tokens_and_every_item_carries_its_limit() -> None:
    pool = _items([10, 150, 400])  # 150 words ~ 308 tokens: room for 204 of the 256 asked; 400: none at all
    fit = _fit(pool, 512, policy="cap", max_tokens=256)
    assert fit.capped == 1 and fit.left_out == ("p2",)
    assert [it.max_tokens for it in fit.items] == [256, 512 - prompt_tokens(pool[1])]


def test_refuse_names_the_fixes_and_nothing_fitting_is_refused_under_any_policy() -> None:
    pool = _items([10, 400])
    with pytest.raises(UserError, match=r"1 of 2 prompts cannot fit the 512-token context .*--fit skip.*-model-len"):
        _fit(pool, 512, policy="refuse")
    assert len(_fit(pool, 4096, policy="refuse").items) == 2
    with pytest.raises(UserError, match="no prompt of the workload fits the 64-token context"):
        _fit(_items([400]), 64)


def test_a_tokenizer_counts_exactly() -> None:
    pool = _items([100, 10])
    assert _fit(pool, 150, count=lambda text: 100).left_out == ()  # 100 + 8 + 16 <= 150
    assert _fit(pool, 150).left_out == ("p0",)  # estimated at 2 tokens a word: no room


def test_the_items_a_fitted_run_sent_are_rebuilt_from_its_manifest() -> None:
    pool = load_workload("builtin:grounded", seed=0).items
    fit = _fit(pool, 512, max_tokens=128, overrides=False, n=24)
    saved = fit.to_manifest()
    assert without(pool, saved["left_out"], 24, 0) == fit.items
    assert fit_note(fit_from_manifest(saved)) == fit_note(fit)


def test_context_from_cards_and_config() -> None:
    cards = [{"id": "a", "max_model_len": 512}, {"id": "b", "max_model_len": True}, {"id": "c"}]
    assert context_from_cards(cards, "a") == 512
    assert context_from_cards(cards, "b") is None and context_from_cards(cards, "c") is None
    with pytest.raises(UserError, match="--fit must be one of skip, cap, refuse"):
        FitConfig(policy="trim")
    with pytest.raises(UserError, match="--max-model-len must be at least 2"):
        FitConfig(max_model_len=1)
