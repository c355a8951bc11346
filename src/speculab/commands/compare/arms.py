"""What `speculab compare` calls its two arms, and whether they measured one target model: decided from the two
paths and what the files name, before any pairing (docs/imports.md).

Arms are named by the shortest part of their two paths that tells them apart (never by a folder name alone: LLMPerf
names its folders by load, so two of them are often both `c1`), or as the user names them (`--names A,B`). A
speculative-decoding A/B holds the target model fixed; two files that name different models are refused unless the
user asks (`--allow-different-models`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path, PurePath

from speculab.errors import UserError

NAMES_FLAG = "--names"
ALLOW_FLAG = "--allow-different-models"


def parse_names(text: str) -> tuple[str, str]:
    """`--names A,B` -> (A, B): two names, different, neither empty."""
    parts = [p.strip() for p in text.split(",")]
    if len(parts) != 2 or not all(parts) or parts[0] == parts[1]:
        raise UserError(
            f"{NAMES_FLAG} {text!r}: give two different names separated by a comma, baseline first, e.g. "
            f"{NAMES_FLAG} vllm,vllm-eagle"
        )
    return parts[0], parts[1]


def distinguishing(a: PurePath, b: PurePath) -> tuple[str, str]:
    """The shortest parts of two paths that tell them apart: their folders and file names with what both share at
    the start and at the end left out (`runs/c1/x.json` vs `spec/c1/x.json` -> `runs` vs `spec`), each keeping at
    least one name. The same path twice is itself, marked (A) and (B)."""
    pa, pb = a.parts, b.parts
    if pa == pb:
        return f"{a.name} (A)", f"{b.name} (B)"
    end = 0  # names shared at the end, each side keeping one at least
    while end < min(len(pa), len(pb)) - 1 and pa[-1 - end] == pb[-1 - end]:
        end += 1
    start = 0  # names shared at the start, before what is left
    while start < min(len(pa), len(pb)) - end - 1 and pa[start] == pb[start]:
        start += 1
    return "/".join(pa[start : len(pa) - end]), "/".join(pb[start : len(pb) - end])


def arm_names(path_a: Path, path_b: Path, names: tuple[str, str] | None = None) -> tuple[str, str]:
    """The two arms' names: `names` where given, else the distinguishing parts of their absolute paths."""
    return names or distinguishing(path_a.absolute(), path_b.absolute())


def row_arm_names(path_a: Path, path_b: Path, a_row: str | None, b_row: str | None) -> tuple[str, str]:
    """The arms' names where --a-row / --b-row may pick rows: each path's distinguishing part (one file split into
    both arms: its name), then `@` and its rows' selector, e.g. `agg_demo.json@spec_decoding=none`."""
    same = path_a.absolute() == path_b.absolute() and a_row != b_row
    a, b = (path_a.name, path_b.name) if same else arm_names(path_a, path_b)
    return (f"{a}@{a_row}" if a_row else a, f"{b}@{b_row}" if b_row else b)


def _model_key(model: str) -> str:
    """A model as two files may both name it: its last path part, case aside (`Qwen/Qwen3-4B` is `/models/qwen3-4b`:
    a served name and a local path of one checkpoint)."""
    return PurePath(model.strip().rstrip("/")).name.lower()


def same_model(path_a: Path, path_b: Path, models_a: Iterable[str], models_b: Iterable[str], allow: bool) -> str:
    """Refuse two results that name different target models (`allow`: compare them anyway); the note the A/B keeps
    about it ("" where there is nothing to say: both name the same model, or neither names one)."""
    ma, mb = (sorted({m for m in ms if m}) for ms in (models_a, models_b))
    if not ma and not mb:
        return ""
    if not ma or not mb:
        named, other = (path_a, path_b) if ma else (path_b, path_a)
        return f"the target model could not be checked: {named} names {', '.join(ma or mb)}, {other} none"
    if {_model_key(m) for m in ma} == {_model_key(m) for m in mb}:
        return ""
    both = f"{path_a} is of model {', '.join(ma)}, {path_b} of {', '.join(mb)}"
    if not allow:
        raise UserError(
            f"{both}: a speculative-decoding A/B compares one target model; give two runs of the same model (or "
            f"{ALLOW_FLAG} to compare them anyway)"
        )
    return f"different target models ({both}), compared as {ALLOW_FLAG} asked: not an A/B of speculation alone"


def output_dir(names: tuple[str, str]) -> Path:
    """The A/B directory compare writes by default: `compare-A-vs-B`, named as the arms are (so two files of one name
    in two folders get two directories), a result file's suffix and the folders' slashes left out."""
    a, b = (_without_suffix(n).replace("/", "-").replace(" ", "-") for n in names)
    return Path(f"compare-{a}-vs-{b}")


def _without_suffix(name: str) -> str:
    suffix = PurePath(name).suffix
    return name.removesuffix(suffix) if suffix in (".json", ".jsonl", ".yaml", ".yml") else name
