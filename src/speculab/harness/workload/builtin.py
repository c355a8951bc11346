"""The built-in workload sets shipped with speculab (original text, `data/*.jsonl`), and their round-robin mixes.

`scripts/make_builtin_workloads.py` writes the data files; bump BUILTIN_VERSION whenever any set's text changes,
so old results say which prompts they used.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources

from speculab.errors import UserError
from speculab.harness.workload.files.jsonl import parse_jsonl_text
from speculab.harness.workload.items import SourceItem

BUILTIN_VERSION = 1  # bump when any built-in set's text changes, so old results say which prompts they used
_DATA_PACKAGE = "speculab.harness.workload.data"


@dataclass(frozen=True, slots=True)
class BuiltinSet:
    name: str  # use as `builtin:NAME`
    # "grounded" (the answer reuses the prompt), "open" (open-ended), "long" (long answers, in no mix), "conversation"
    # (multi-turn), "structured" (a response_format with each item), "mix"
    kind: str
    count: int  # items in the set
    description: str


_BUILTIN: dict[str, tuple[str, str]] = {  # name -> (kind, description); order is the interleaving order
    "code-edit": (
        "grounded",
        "a given Python function or class plus an edit (rename, add a parameter, type hints, fix)",
    ),
    "extraction": ("grounded", "a given record or passage; extract named fields as JSON"),
    "summarize": ("grounded", "a given passage of 150-300 words; summarize or rewrite it"),
    "rag-qa": ("grounded", "a few given context paragraphs and a question answered from them, quoting the source"),
    "writing": ("open", "stories, emails, descriptions and other open-ended writing"),
    "qa": ("open", "general-knowledge explanations"),
    "math": ("open", "word problems with a single numeric answer"),
    "chat": (
        "conversation",
        "multi-turn: code revised turn by turn, a document summarised then questioned, a text rewritten shorter",
    ),
    "long": (
        "long",
        "long answers (512-768 max_tokens): stories, essays, tutorials with code, plans, lists; where loops show",
    ),
    "json": (
        "structured",
        "structured outputs: fields extracted from a given record, asked for with a response_format JSON schema",
    ),
}
_MIXES: dict[str, tuple[str, str]] = {
    "grounded": ("mix", "all input-grounded sets, interleaved round-robin"),
    "open": ("mix", "all open-ended sets, interleaved round-robin"),
    "mixed": ("mix", "every single-turn built-in set, grounded and open alternating, interleaved round-robin"),
}


def list_builtin() -> tuple[BuiltinSet, ...]:
    """Every built-in workload (sets, then mixes) with its kind, item count and a one-line description."""
    sets = [BuiltinSet(n, kind, len(_builtin_items(n)), desc) for n, (kind, desc) in _BUILTIN.items()]
    # a mix interleaves its sets and drops nothing: its count is theirs, without building the interleaved list
    mixes = [
        BuiltinSet(n, kind, sum(len(_builtin_items(m)) for m in _mix_members(n)), desc)
        for n, (kind, desc) in _MIXES.items()
    ]
    return tuple(sets + mixes)


def _builtin_text(name: str) -> str:
    return resources.files(_DATA_PACKAGE).joinpath(f"{name}.jsonl").read_text(encoding="utf-8")


@functools.cache
def _builtin_items(name: str) -> tuple[SourceItem, ...]:
    """A shipped set's items, parsed once a process: the mixes hold the sets again. `speculab workload` counts every
    set and mix: 1.3 s of CPU with each set parsed once per list it is in, 0.46 s parsed once (the 2-core VM; most of
    it jsonschema checking the structured items' schemas)."""
    return tuple(parse_jsonl_text(_builtin_text(name), f"builtin:{name}"))


def _mix_members(name: str) -> list[str]:
    grounded = [n for n, (k, _) in _BUILTIN.items() if k == "grounded"]
    opened = [n for n, (k, _) in _BUILTIN.items() if k == "open"]
    if name == "grounded":
        return grounded
    if name == "open":
        return opened
    # mixed: alternate grounded and open sets so any prefix of the mix holds both kinds
    order = []
    for i in range(max(len(grounded), len(opened))):
        order += grounded[i : i + 1] + opened[i : i + 1]
    return order


def _mix_items(name: str) -> list[SourceItem]:
    return list(_round_robin([_builtin_items(m) for m in _mix_members(name)]))


def _round_robin(lists: Sequence[Sequence[SourceItem]]) -> Iterator[SourceItem]:
    """a0 b0 c0 a1 b1 c1 ...; a list that runs out drops out, the rest continue in order."""
    for i in range(max((len(x) for x in lists), default=0)):
        for x in lists:
            if i < len(x):
                yield x[i]


def load_builtin(name: str) -> tuple[str, list[SourceItem]]:
    if name in _BUILTIN:
        files = [name]
        items = list(_builtin_items(name))
    elif name in _MIXES:
        files = _mix_members(name)
        items = _mix_items(name)
    else:
        known = ", ".join([*_BUILTIN, *_MIXES])
        raise UserError(
            f"unknown built-in workload {name!r}; choose one of: {known} (`speculab workload` describes them)"
        )
    digest = hashlib.sha256("".join(_builtin_text(f) for f in files).encode()).hexdigest()
    return f"builtin:{name} v{BUILTIN_VERSION} (sha256 {digest})", items
