"""Fit a workload to a server's context before the first request: the one mechanism bench, run, init, demo and
diagnose share (docs/workloads.md, "Fitting the context").

A request whose prompt plus max_tokens exceeds the context is refused by the server (HTTP 400); sending it anyway
turns a workload that is merely too long for this model into an error rate, and no verdict. So the items are fitted
first, with one of three policies:

    skip    (default) leave out the items that cannot fit, the same ones from every arm, and say how many: every
            request that is sent is exactly the one asked for (its prompt, its max_tokens), so nothing measured is
            distorted; the left-out prompt ids go to the manifest and the report
    cap     lower max_tokens of the items that need it to what the context leaves (items whose prompt alone cannot
            fit are left out): every prompt is kept, but the longest prompts' outputs are cut, which shortens exactly
            the requests where speculation has most to gain or lose
    refuse  stop before the first request, naming how many items cannot fit

Prompt tokens are counted with a local tokenizer when one is given, else estimated from the text (`approx_tokens`
x APPROX_FACTOR: a word count undercounts a small model's tokens by up to 2x on the built-in sets) plus a few tokens
for a chat template or BOS. The estimate errs long: it leaves out a prompt that might have fit rather than send one
the server refuses.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from speculab.errors import UserError, did_you_mean
from speculab.harness.records import RequestSpec
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.workload.conversation import conversations
from speculab.harness.workload.items import MAX_CONTEXT_TOKENS, approx_tokens, item_text, request_seed

FIT_POLICIES = ("skip", "cap", "refuse")
DEFAULT_FIT = "skip"
APPROX_FACTOR = 2.0  # measured on the built-in sets with the demo tokenizer: at most 2.2, median 1.55 (docs/workloads)
TEMPLATE_TOKENS = 8  # BOS, a chat template's role markers
MIN_CAPPED_TOKENS = 8  # cap: fewer output tokens than this is not a request worth measuring; leave it out
_POOL_KINDS = ("synthetic", "trace")  # sources that are sized (or replayed) by num_prompts themselves

TokenCount = Callable[[str], int]


@dataclass(frozen=True, slots=True)
class FitConfig:
    """How a command fits its workload: the policy and the context the user gives (None: ask the server)."""

    policy: str = DEFAULT_FIT
    max_model_len: int | None = None  # --max-model-len: wins over what the server says

    def __post_init__(self) -> None:
        if self.policy not in FIT_POLICIES:
            raise UserError(
                f"--fit must be one of {', '.join(FIT_POLICIES)}, not {self.policy!r}"
                + did_you_mean(self.policy, FIT_POLICIES)
            )
        if self.max_model_len is not None and self.max_model_len < 2:
            raise UserError(f"--max-model-len must be at least 2, got {self.max_model_len}")


@dataclass(frozen=True, slots=True)
class Fit:
    """The items a run sends, and what fitting them to the context changed."""

    items: tuple[RequestSpec, ...]
    context: int | None  # tokens; None: unknown, nothing was fitted
    policy: str
    max_tokens: int | None  # the run's default output limit
    pool: int = 0  # distinct items looked at
    left_out: tuple[str, ...] = ()  # prompt ids (a conversation's once) that could not fit
    capped: int = 0  # items whose max_tokens was lowered (policy cap)
    counted: str = "approx"  # "tokenizer" | "approx"

    @property
    def changed(self) -> bool:
        return bool(self.left_out or self.capped)

    def to_manifest(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "context": self.context,
            "max_tokens": self.max_tokens,
            "counted": self.counted if self.counted == "tokenizer" else f"approx x{APPROX_FACTOR:g}",
            "items_considered": self.pool,
            "left_out": list(self.left_out),
            "capped": self.capped,
        }


def fit_from_manifest(d: Mapping[str, Any]) -> Fit:
    """A saved `Fit.to_manifest()` back (without its items), for the note of a run read back from disk."""
    return Fit(
        (),
        d.get("context"),
        str(d.get("policy", DEFAULT_FIT)),
        d.get("max_tokens"),
        int(d.get("items_considered") or 0),
        tuple(str(x) for x in d.get("left_out") or ()),
        int(d.get("capped") or 0),
    )


def fit_warning(fit: Fit) -> ReportWarning | None:
    """The one warning a run's notes and a bench summary carry about fitting (the report words it); None when
    nothing changed."""
    if not fit.changed:
        return None
    fields = {
        "left_out": list(fit.left_out),
        "pool": fit.pool,
        "capped": fit.capped,
        "context": fit.context,
        "max_tokens": fit.max_tokens,
        "policy": fit.policy,
    }
    return ReportWarning(WarningKind.WORKLOAD_FITTED, fields=fields)


def pool_size(spec: str, num_prompts: int | None) -> int | None:
    """How many items to load before fitting: all of a finite set (None), so that items left out can be replaced
    by the next ones; a synthetic set or a trace as asked (they are sized, or replayed once, by num_prompts)."""
    return num_prompts if spec.partition(":")[0] in _POOL_KINDS else None


def context_from_cards(cards: Sequence[Mapping[str, Any]], model: str) -> int | None:
    """The served model's context length from /v1/models (vLLM's and speculab's `max_model_len`); None if unsaid."""
    for card in cards:
        n = card.get("max_model_len")
        # a server claiming more than any model holds (10^30) has not said its context: prompts are built up to it
        if card.get("id") == model and isinstance(n, int) and not isinstance(n, bool) and 2 <= n <= MAX_CONTEXT_TOKENS:
            return n
    return None


def prompt_tokens(item: RequestSpec, count: TokenCount | None = None) -> int:
    """A request's prompt tokens, counted or estimated long (see the module docstring)."""
    text = item_text(item)
    n = count(text) if count is not None else math.ceil(approx_tokens(text) * APPROX_FACTOR)
    return n + TEMPLATE_TOKENS


def output_tokens(item: RequestSpec, max_tokens: int | None, overrides_items: bool) -> int:
    """The output limit a request asks for, as `client.endpoint.build_payload` sends it (0: none given)."""
    if item.max_tokens is not None and not overrides_items:
        return item.max_tokens
    return max_tokens or 0


def fit_items(
    pool: Sequence[RequestSpec],
    *,
    context: int | None,
    policy: str,
    max_tokens: int | None,
    overrides_items: bool,
    num_prompts: int | None,
    seed: int,
    count: TokenCount | None = None,
) -> Fit:
    """The run's items: `pool` fitted to `context` by `policy`, then taken (cycled) to `num_prompts` as the loader
    takes them. With nothing to change the result is what `load_workload(spec, seed, num_prompts)` gives."""
    kept, left_out, capped = list(pool), [], 0
    if context is not None:
        kept, carried, left_out = [], [], []
        for conv in conversations(pool):
            fitted, history = [], 0
            for it in conv:  # a later turn is sent behind the earlier turns and their answers
                fitted.append(_fit_one(it, context, policy, max_tokens, overrides_items, count, history))
                history += prompt_tokens(it, count) + output_tokens(it, max_tokens, overrides_items)
            if any(f is None for f in fitted):  # a conversation goes whole or not at all
                left_out.append(_unit_id(conv))
                continue
            for f, it in zip(fitted, conv, strict=True):
                assert f is not None
                capped += f is not it
                kept.append(f)
                # with a limit capped, the run sends each item's own (the config's stops overriding them): so
                # every item carries the limit it would have been sent with
                out = output_tokens(it, max_tokens, overrides_items) or None
                carried.append(f if f is not it else dataclasses.replace(it, max_tokens=out))
        _check(pool, kept, left_out, context, policy, max_tokens, count)
        kept = carried if capped else kept
    items = take(kept, num_prompts, seed) if (left_out or capped or num_prompts is not None) else tuple(kept)
    return Fit(
        items,
        context,
        policy,
        max_tokens,
        sum(1 for _ in conversations(pool)),
        tuple(left_out),
        capped,
        "tokenizer" if count is not None else "approx",
    )


def _fit_one(
    it: RequestSpec,
    context: int,
    policy: str,
    max_tokens: int | None,
    overrides: bool,
    count: TokenCount | None,
    history: int = 0,
) -> RequestSpec | None:
    """The item as sent (the same one, or under `cap` with a lower max_tokens), or None if it cannot fit; `history`:
    the tokens of a conversation's earlier turns and answers (at most their max_tokens) sent before it."""
    prompt, out = history + prompt_tokens(it, count), output_tokens(it, max_tokens, overrides)
    if prompt + max(out, 1) <= context:
        return it
    room = context - prompt
    if policy == "cap" and room >= MIN_CAPPED_TOKENS:
        return dataclasses.replace(it, max_tokens=room)
    return None


def _check(
    pool: Sequence[RequestSpec],
    kept: list[RequestSpec],
    left_out: list[str],
    context: int,
    policy: str,
    max_tokens: int | None,
    count: TokenCount | None,
) -> None:
    """Refuse (one line naming the fixes) when the policy is refuse and anything cannot fit, or when nothing fits."""
    if not left_out or (policy != "refuse" and kept):
        return
    shortest = min(prompt_tokens(it, count) for it in pool)
    limits = f"the {context}-token context with max_tokens {max_tokens}"
    if policy == "refuse":
        raise UserError(
            f"{len(left_out)} of {len(left_out) + len(list(conversations(kept)))} prompts cannot fit {limits} "
            f"(e.g. {left_out[0]}); leave them out (--fit skip, or workload.fit: skip), lower max_tokens to fit "
            "(--fit cap), or serve a longer context (the server's --max-model-len)"
        )
    raise UserError(
        f"no prompt of the workload fits {limits} (the shortest is about {shortest} tokens); lower --max-tokens, "
        "use shorter prompts, or serve a longer context (the server's --max-model-len)"
    )


def without(pool: Sequence[RequestSpec], left_out: Sequence[str], n: int | None, seed: int) -> tuple[RequestSpec, ...]:
    """The items a fitted run sent, rebuilt from its pool and the ids its manifest says were left out."""
    gone = set(left_out)
    kept = [it for c in conversations(pool) if _unit_id(c) not in gone for it in c]
    return take(kept, n, seed)


def _unit_id(conv: Sequence[RequestSpec]) -> str:
    return conv[0].conversation_id or conv[0].prompt_id or str(conv[0].index)


def take(items: Sequence[RequestSpec], n: int | None, seed: int) -> tuple[RequestSpec, ...]:
    """The first `n` requests of `items`, cycling through them again in order when n is larger, each position
    renumbered with its own seed and a conversation met again renamed "ID#2", "ID#3", ... (as
    `workload.items.finalize` cycles a source)."""
    units = list(conversations(items))
    total = len(items) if n is None else n
    out: list[RequestSpec] = []
    cycle = 0
    while len(out) < total and units:
        cycle += 1
        for unit in units:
            for spec in unit:
                if len(out) == total:
                    return tuple(out)
                i = len(out)
                conv = spec.conversation_id
                if conv is not None and cycle > 1:
                    conv = f"{conv}#{cycle}"
                out.append(dataclasses.replace(spec, index=i, seed=request_seed(seed, i), conversation_id=conv))
    return tuple(out)
