"""Correctness beyond equality in words (`harness.analysis.paired_checks`, issue 50 item 3): a prompt streamed
otherwise than answered unary, an arm's streaming-path defect, stream against unary not judged, an output invalid
against its response_format, each arm's structured-output validity, and a lossy candidate judged by its checks only.
Merged into `words.WORDS`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from speculab.harness.results.warnings import WarningKind

Fields = Mapping[str, Any]


def _tokens(n: int) -> str:
    return f"{n} token{'' if n == 1 else 's'}"


def _item(f: Fields) -> str:
    return f"item {f['item']}" + (f" ({f['prompt_id']})" if f.get("prompt_id") else "")


def stream_differs_text(f: Fields) -> str:
    """'item 3 (json-003): the stream lacks 2 tokens the unary answer has, from character 57'."""
    if f["kind"] == "dropped":
        what = f"the stream lacks {_tokens(f['dropped_tokens'])} the unary answer has"
    elif f["kind"] == "duplicated":
        what = f"the stream has {_tokens(f['duplicated_tokens'])} the unary answer does not (sent twice)"
    else:
        n = f["dropped_tokens"]
        what = f"the stream has other text ({_tokens(f['duplicated_tokens'])} for the unary answer's {n})"
    return f"{_item(f)}: {what}, from character {f['position']}"


def _streaming_defect(f: Fields) -> str:
    who = "streaming-path defect" if f["side"] == "candidate" else "the baseline's streaming path too (no speculation)"
    return (
        f"{who}: {f['count']} of {f['of']} prompts streamed otherwise than the same request answered unary at "
        f"temperature 0 (a fault of the stream, not outputs that differ between the arms); first, "
        f"{stream_differs_text(f['first'])}"
    )


def _not_judged(f: Fields) -> str:
    t = f.get("temperature")
    at = "temperature not recorded" if t is None else f"temperature {t:g}"
    return f"stream against unary not judged: at {at} a stream and a unary answer may differ by design (temperature 0)"


def _structured(f: Fields) -> str:
    rates = f"{f['candidate_rate']:.0%} vs the baseline's {f['baseline_rate']:.0%} of {f['of']} prompts"
    if f.get("lower"):
        return f"structured outputs valid less often ({rates}, McNemar p = {f['p_value']:.2g})"
    return f"structured outputs valid in {rates} (McNemar p = {f['p_value']:.2g})"


def _lossy(f: Fields) -> str:
    checked = "the checks found no difference" if f.get("checked") else "no check judged it: give the workload checks"
    return (
        f"judged by checks only: its acceptance is lossy ({'; '.join(f['by'])}), so its outputs are not expected to "
        f"equal the baseline's; {checked}"
    )


PAIRED_CHECK_WORDS: dict[WarningKind, Callable[[Fields], str]] = {
    WarningKind.STREAM_DIFFERS: stream_differs_text,
    WarningKind.STREAMING_DEFECT: _streaming_defect,
    WarningKind.STREAM_UNARY_ALIKE: lambda f: f"every sampled prompt ({f['of']}) streamed as answered unary",
    WarningKind.STREAM_UNARY_NOT_JUDGED: _not_judged,
    WarningKind.STRUCTURED_INVALID: lambda f: f"{_item(f)}: not valid against its response_format: {f['reason']}",
    WarningKind.STRUCTURED_OUTPUT: _structured,
    WarningKind.LOSSY_ACCEPTANCE: _lossy,
}
