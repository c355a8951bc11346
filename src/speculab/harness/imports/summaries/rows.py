"""One arm's rows of a file that holds several configurations (draftbench's target × draft rows, a SpecForge
config list, an InferenceX collection of baseline and MTP runs): `--a-row` / `--b-row` pick them, and a side whose
runs are of several configurations unpicked is refused, since averaging a baseline row with a speculative one, or
pairing them as repeats, would be an answer to no question.

A selector is a row's number as the refusal lists them (1-based, in file order), or `FIELD=VALUE[,FIELD=VALUE...]`
matched against each row's own fields by the file's names (case aside; a null, or a field the row lacks, is `none`):
`--a-row 1`, `--b-row draft=0.5B Q8_0`, `--a-row spec_decoding=none,tp=8`. Rows at several loads that match are the
arm's loads, compared load by load."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from speculab.errors import UserError
from speculab.harness.imports.summaries.summary import RunSummary

A_ROW, B_ROW = "--a-row", "--b-row"
# how many configurations, or values of a field, a refusal lists
_LISTED = 8


@dataclass(frozen=True, slots=True)
class RowSelector:
    """A parsed `--a-row` / `--b-row`: a row's number, or fields every picked row has."""

    text: str
    index: int | None = None
    match: tuple[tuple[str, str], ...] = ()


def parse_row(text: str, flag: str) -> RowSelector:
    """`3` -> row 3; `k=v,k2=v2` -> rows with both; anything else refused naming the two forms."""
    text = text.strip()
    if text.isdigit() and int(text) > 0:
        return RowSelector(text, index=int(text))
    pairs = [p.partition("=") for p in text.split(",")]
    if not text or any(not k.strip() or not eq or not v.strip() for k, eq, v in pairs):
        raise UserError(
            f"{flag} {text!r}: give a row's number (1 is the file's first row) or FIELD=VALUE[,FIELD=VALUE], e.g. "
            f"{flag} draft=none"
        )
    return RowSelector(text, match=tuple((k.strip(), v.strip()) for k, _, v in pairs))


def pick_rows(
    runs: Sequence[RunSummary], selector: RowSelector | None, path: Path, flag: str
) -> tuple[RunSummary, ...]:
    """The runs of one arm: those `selector` picks (all where None), which must be of one configuration."""
    picked = tuple(runs) if selector is None else _picked(runs, selector, path, flag)
    _one_configuration(picked, path, flag, selector)
    return picked


def _picked(runs: Sequence[RunSummary], selector: RowSelector, path: Path, flag: str) -> tuple[RunSummary, ...]:
    rows = [r for r in runs if r.row is not None]
    if not rows:
        raise UserError(
            f"{flag} {selector.text}: {path} holds one configuration (no rows to pick: {flag} splits a file of "
            f"several, e.g. a draftbench or SpecForge file); leave {flag} out"
        )
    if selector.index is not None:
        found = tuple(r for r in rows if r.row is not None and r.row.index == selector.index)
        if not found:
            raise UserError(f"{flag} {selector.text}: {path} has rows 1 to {len(rows)}; give one of them")
        return found
    found_rows = rows
    for key, value in selector.match:
        known = sorted({k for r in rows if r.row is not None for k in r.row.fields})
        if key not in known:
            raise UserError(f"{flag} {selector.text}: {path}'s rows have no field {key!r}; theirs: {', '.join(known)}")
        values = _values(found_rows, key)
        found_rows = [r for r in found_rows if _value(r, key).lower() == value.lower()]
        if not found_rows:
            rest = " with the rest of it" if len(selector.match) > 1 else ""
            raise UserError(
                f"{flag} {selector.text}: no row of {path} has {key}={value}{rest}; its {key}: "
                f"{', '.join(values[:_LISTED])}{' ...' if len(values) > _LISTED else ''}"
            )
    return tuple(found_rows)


def _value(run: RunSummary, key: str) -> str:
    """A run's row's field `key` ("none" where the row lacks it, "" where the run is no row)."""
    return run.row.fields.get(key, "none") if run.row is not None else ""


def _values(runs: Sequence[RunSummary], key: str) -> list[str]:
    """The values of field `key` among `runs`' rows, in file order, each once."""
    return list(dict.fromkeys(_value(r, key) for r in runs if r.row is not None))


def _one_configuration(runs: Sequence[RunSummary], path: Path, flag: str, selector: RowSelector | None) -> None:
    """Refuse an arm whose runs are of several configurations, naming the fields they differ in and their values."""
    configs = list(dict.fromkeys(r.row.configuration for r in runs if r.row is not None))
    if len(configs) < 2:
        return
    keys = list(dict.fromkeys(k for c in configs for k, _ in c))  # a row without a field has it as none
    differ = [k for k in keys if len(_values(runs, k)) > 1]
    listed = "; ".join(f"{k}: {', '.join(_values(runs, k)[:_LISTED])}" for k in differ)
    asked = f"the rows {flag} {selector.text} picks" if selector is not None else f"{path}'s rows"
    example = f"{differ[0]}={_values(runs, differ[0])[0]}" if differ else "1"
    example = f"{selector.text},{example}" if selector is not None and selector.match and differ else example
    example = f"'{example}'" if " " in example else example
    raise UserError(
        f"{asked} are of {len(configs)} configurations ({listed}): an arm is one; pick each arm's rows with "
        f"{A_ROW} / {B_ROW} (a row's number, or FIELD=VALUE[,FIELD=VALUE]), e.g. {A_ROW} {example}"
    )


def shared_loads(
    a: Sequence[RunSummary], b: Sequence[RunSummary]
) -> tuple[tuple[RunSummary, ...], tuple[RunSummary, ...], tuple[str, ...], tuple[str, ...]]:
    """Two arms picked from files of several configurations, each kept to the loads both have (a collection's
    baseline rows are often at more concurrencies than its speculative ones), with the loads each lost by label;
    unchanged where they share none (the same-load check refuses them)."""
    keys = {r.level.key for r in a} & {r.level.key for r in b}
    if not keys:
        return tuple(a), tuple(b), (), ()

    def lost(runs: Sequence[RunSummary]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.level.label for r in runs if r.level.key not in keys))

    kept_a, kept_b = (tuple(r for r in runs if r.level.key in keys) for runs in (a, b))
    return kept_a, kept_b, lost(a), lost(b)
