"""The reasons and warnings said with a run, one per kind: why acceptance is unknown (bench's
`server.spec_decode_note`, a repeat's `acceptance_unknown`), what showed a server gone, a look's comparisons still
open, the plan's warnings said before the run, the single-change check's note. A record kept inside another's fields
is said with `said`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from speculab.harness.results.warnings import ReportWarning, WarningKind

Fields = Mapping[str, Any]


def said(d: Fields | str) -> str:
    """A record kept inside another's fields (its `to_dict`), or the sentence an older file kept there, in words."""
    w = ReportWarning.from_dict(d)
    return str(w.fields["text"]) if w.kind == WarningKind.NOTE else REASON_WORDS[w.kind](w.fields)


def gone_evidence(f: Fields) -> str:
    """What showed the server gone, as the client saw it (servers.liveness.GoneEvidence); an older file's sentence."""
    if "evidence" in f:
        return str(f["evidence"])
    return (
        f"{f['failures']} requests in a row could not connect ({f['detail']}), nor could {f['probes']} probes of "
        f"/v1/models over {f['probe_s']:.1f} s"
    )


def _counter_went_backwards(f: Fields) -> str:
    moved = f" ({f['before']:g} -> {f['after']:g})" if f.get("before") is not None else ""
    return f"{f['counter']} went backwards{moved}: the server restarted between scrapes"


_METRICS_UNREAD = {
    "absent": "no Prometheus /metrics at the endpoint",
    "disabled": "metrics scraping disabled",
    "after": "/metrics could not be read after the run",
}


def _look_open(f: Fields) -> str:
    return (
        f"{f['candidate']} at {f['at']} ({f['decision']}: {f['speedup']:.3g}× [{f['low']:.3g}–{f['high']:.3g}] against "
        f"the ±{f['margin']:.0%} margin)"
    )


# Said as lines of the plan before the run, after its description: "warning: ..." as they always were
_UNCHECKED_BECAUSE = {
    "two_url": lambda f: "in two-URL mode speculab launches no candidate",
    "whole_command": lambda f: "candidate.command is given whole",
    "no_command": lambda f: "no launch command",
    "not_askable": lambda f: f"speculab cannot ask engine {f['engine']} what it accepts",
    "unreadable": lambda f: f"{f.get('problem') or 'the engine could not be read'}; the engine will say at launch",
    "options_unreadable": lambda f: (
        f"{f['engine']}{' ' + f['release'] if f.get('release') else ''}'s speculation options could not be read"
    ),
}


def _methods_unchecked(f: Fields) -> str:
    parts = [f"speculation method {', '.join(f['methods'])}"] if f.get("methods") else []
    if f.get("options_of"):
        parts.append(f"speculation.options of {', '.join(f['options_of'])}")
    what = " and ".join(parts) + (" are" if len(parts) > 1 else " is")
    return f"warning: {what} unchecked: {_UNCHECKED_BECAUSE[f['why']](f)}"


def _few_groups(f: Fields) -> str:
    conversations = "" if f["what"] == "prompts" else " (num_prompts counts their requests)"
    return (
        f"warning: at {f['at']} the {f['n']} {f['what']} make {f['groups']} groups of {f['size']} sent together; for a "
        f"verdict they need at least {f['min_groups']} groups: use at least {f['min_groups'] * f['size']} {f['what']} "
        f"at this load{conversations}"
    )


# Why the single change could not be checked (CHANGE_NOT_CHECKED's `why`)
_NOT_CHECKED_BECAUSE = {
    "engine_other": "engine `other`: speculab does not know its speculation flags; check the difference yourself",
    "two_url": (
        "two-URL mode: both servers were already running, so speculab could not verify that speculation is the only "
        "difference; what each server reports about itself is recorded with the arms"
    ),
    "separate_bench_runs": "compare: two separate bench runs; speculab could not verify what differs between them",
    "separate_runs": "compare: two separate runs; speculab could not verify what differs",
    "not_recorded": "no command comparison recorded",
}


def _not_speculation(f: Fields) -> str:
    allowed = "; run anyway because of --allow-extra-diff" if f.get("allowed") else ""
    return f"not speculation: {'; '.join(f['differs']) or 'the commands are identical'}{allowed}"


REASON_WORDS: dict[WarningKind, Callable[[Fields], str]] = {
    # why acceptance is unknown, a look's open comparisons, the plan's warnings (the methods table's: METHOD_WORDS)
    WarningKind.NO_DRAFTED_TOKENS: lambda f: f"{f['source']} shows no drafted tokens",
    WarningKind.NO_SPEC_METRICS: lambda f: (
        f"the server exposes no speculative-decoding metrics ({', '.join(f['prefixes'][:-1])} or {f['prefixes'][-1]})"
    ),
    WarningKind.COUNTER_WENT_BACKWARDS: _counter_went_backwards,
    WarningKind.COUNTERS_INCONSISTENT: lambda f: (
        f"{f['accepted']} grew more than {f['drafted']} ({f['accepted_delta']:g} > {f['drafted_delta']:g}): the "
        "counters are inconsistent"
    ),
    WarningKind.COUNTERS_DID_NOT_MOVE: lambda f: (
        f"{f['engine']}:spec_decode counters did not move: no speculative steps during the window"
    ),
    WarningKind.GAUGES_OUT_OF_RANGE: lambda f: (
        f"{f['length_gauge']} / {f['rate_gauge']} are out of range (length {f['length']:g}, rates {f['rates']}): not "
        "trusted"
    ),
    WarningKind.GAUGE_NO_STEPS: lambda f: f"{f['length_gauge']} is {f['length']:g}: no speculative steps reported",
    WarningKind.METRICS_UNREAD: lambda f: _METRICS_UNREAD[f["how"]],
    WarningKind.LOOK_OPEN: _look_open,
    WarningKind.LOOK_STILL_OPEN: lambda f: (
        f"after repeat {f['repeat']}: still open: {', '.join(said(o) for o in f['open'])}"
    ),
    WarningKind.METHODS_UNCHECKED: _methods_unchecked,
    WarningKind.FEW_GROUPS: _few_groups,
    WarningKind.SEARCH_FEW_PROMPTS: lambda f: (
        f"warning: a probe at {f['high']:g} needs {f['needed']} prompts for its groups and the workload has "
        f"{f['have']}: raise workload.num_prompts (or lower loads.search.high)"
    ),
    # the single-change check's note, said after its verdict (before the run, in report.html, in change_unverified)
    WarningKind.CHANGE_NOT_SPECULATION: _not_speculation,
    WarningKind.CHANGE_NOT_CHECKED: lambda f: _NOT_CHECKED_BECAUSE[f["why"]],
    WarningKind.CHANGE_SAID: lambda f: (
        "from what both servers said they run (/version server_args), not from their commands"
    ),
}
