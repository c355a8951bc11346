"""Why acceptance is not the user's traffic's, one sentence per kind (`harness.workload.validity`'s records): said
first in the A/B report's headline and with bench's and a read file's warnings. Each opens with what is not the
user's, so its first words are the headline ("acceptance measured on synthetic prompts: not your traffic's"), then the
evidence, then what would measure the user's."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from speculab.harness.results.warnings import WarningKind

Fields = Mapping[str, Any]

# what the recommendation says of a candidate it chose nothing for on such evidence, and the k choice of it
NOT_USERS_ANSWER = "its acceptance is not your traffic's (see the first lines): undecided"
NOT_USERS_K = "their acceptance is not your traffic's (see the first lines)"


def _synthetic(f: Fields) -> str:
    n, of, source = f["prompts"], f.get("of"), f.get("source")
    share = "every prompt" if n == of else f"{n} of {of} prompts" if of else f"{n} prompts"
    if source == "synthetic":
        made = f"{share} random words speculab wrote (`synthetic:`)"
    elif source == "trace":
        made = f"{share} written by speculab from the trace's input lengths (random words)"
    else:
        made = f"the file's dataset is `{source}`: prompts the benchmark made up"
    return (
        f"acceptance measured on synthetic prompts: not your traffic's ({made}); drafts match made-up text unlike "
        "real prompts, so measure on your own prompts before choosing speculation or k"
    )


def _ignore_eos(f: Fields) -> str:
    where = "" if f.get("source", "run") == "run" else f" (the file's `{f['source']}` setting)"
    return (
        f"acceptance measured with ignore_eos{where}: not your traffic's (outputs ran on past where the model stops, "
        "into text no user receives); measure without ignore_eos before choosing speculation or k"
    )


def _forced(f: Fields) -> str:
    seen = [f"started with {', '.join(f['configured'])}"] if f.get("configured") else []
    seen += [f"the engine reported {', '.join(f['reported'])}"] if f.get("reported") else []
    return (
        f"acceptance forced, not measured: the engine accepted drafts by a draw to set rates ({'; '.join(seen)}), "
        "a cost probe: its acceptance and speed are not your traffic's"
    )


def _short(f: Fields) -> str:
    capped = f"; {f['capped']:.0%} stopped by the length limit" if f.get("capped") is not None else ""
    steps = round(f["needed"] / f["tokens_per_step"])
    size = "the acceptance length measured" if f.get("measured") else "k + 1, as at full acceptance"
    per = f"{steps} steps of {f['tokens_per_step']:.2g} tokens, {size}"
    return (
        f"acceptance measured on outputs too short for k={f['k']}: a median of {f['median_output_tokens']:g} output "
        f"tokens, under {f['needed']} ({per}){capped}: each request is little more than its first steps and the one "
        "the limit cut; raise max_tokens before choosing k"
    )


VALIDITY_WORDS: dict[WarningKind, Callable[[Fields], str]] = {
    WarningKind.ACCEPTANCE_SYNTHETIC_PROMPTS: _synthetic,
    WarningKind.ACCEPTANCE_IGNORE_EOS: _ignore_eos,
    WarningKind.ACCEPTANCE_FORCED: _forced,
    WarningKind.ACCEPTANCE_SHORT_OUTPUTS: _short,
}
