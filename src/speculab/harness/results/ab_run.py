"""An A/B run as it is saved: each repeat of an arm at a load (`RepeatRun`), each candidate's single-change check
(`ChangeCheck`), and the whole run (`ABRun`).

The lifecycle (`speculab.commands.run`) produces these while it runs; `ab_dir` lays them out on disk and
reads them back; the verdict (`speculab.harness.verdict`) is built from them. Nothing here is derived: only what was
asked (`harness.design`) and what was observed (records, counters, memory samples). Seconds everywhere; memory in
bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from speculab.harness.design import BASELINE, ArmInfo, LevelSpec, Setup
from speculab.harness.records import AcceptanceSummary, CacheResetOutcome, MemorySample, RequestRecord, RequestSpec
from speculab.harness.results.strict_json import json_safe
from speculab.harness.results.warnings import ReportWarning, WarningKind

# /2: `notes` (here and in each repeat's run.json) and each change's `note` are warning records, not sentences; /1
# (and a /2 file from before the change's note was one) still reads, each sentence a note
INPUTS_SCHEMA = "speculab.report.inputs/2"
INPUTS_SCHEMA_V1 = "speculab.report.inputs/1"

# The single-change check lives here, not in `harness.design`, because its note is a record (`warnings`) and this
# package already stands on `design`.
# A single change checked from what both servers said they run (speculab serve's /version), not from commands.
SAID_NOTE = ReportWarning(WarningKind.CHANGE_SAID)


def not_checked(why: str) -> ReportWarning:
    """Why a single change could not be checked (CHANGE_NOT_CHECKED's `why`: engine_other | two_url |
    separate_bench_runs | separate_runs | not_recorded)."""
    return ReportWarning(WarningKind.CHANGE_NOT_CHECKED, fields={"why": why})


@dataclass(frozen=True, slots=True)
class ChangeCheck:
    """The single-change rule for one candidate: the command difference and whether it is speculation only."""

    candidate: str  # ArmInfo.name
    diff_lines: tuple[str, ...]  # CommandDiff.lines()
    verified: bool | None  # True: only speculation differs; False: more differs; None: could not be verified
    # what to read the verdict with, a CHANGE_* record (the report words it; None: nothing): what differs beyond
    # speculation, why it could not be checked, or that the servers' own words checked it
    note: ReportWarning | None = None

    def to_dict(self) -> dict[str, Any]:
        """inputs.json's `changes[]` entry (the note as its record; null: none)."""
        note = self.note.to_dict() if self.note is not None else None
        return {
            "candidate": self.candidate,
            "diff_lines": list(self.diff_lines),
            "verified": self.verified,
            "note": note,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ChangeCheck:
        """An entry as `to_dict` wrote it; a file before #48 item 3 kept the note as its sentence ("" for none), read
        back as a `note` record that says the same words."""
        note = d.get("note")
        return cls(
            d["candidate"], tuple(d["diff_lines"]), d["verified"], ReportWarning.from_dict(note) if note else None
        )


@dataclass(frozen=True, slots=True)
class RepeatRun:
    """One arm at one load level, one repeat: the records and what the server reported around it."""

    arm: str  # ArmInfo.name
    level: str  # LevelSpec.key
    repeat: int  # 1-based
    records: tuple[RequestRecord, ...] = ()
    acceptance: AcceptanceSummary | None = None  # from the engine adapter; None = engine reports none
    memory: tuple[MemorySample, ...] = ()
    gpu_scope: str = ""  # "process" (NVML per-process) or "device" (whole GPU) or "" (no GPU readings)
    order: int = 0  # position in the whole run sequence (ABBA), for drift plots
    interrupted: bool = False  # the repeat did not finish (Ctrl-C, crash): records are partial
    counter_deltas: Mapping[str, float] = field(default_factory=dict)  # raw /metrics deltas, for the record
    notes: tuple[ReportWarning, ...] = ()  # anything the lifecycle wants the reader to know about this repeat
    # (start, end) clock seconds of each block's measured phase, the records' clock. Two-URL mode runs an arm in
    # blocks with the other arm's in between: achieved load and throughput count these windows only
    # (`analysis.windows`). () = not recorded (compare, older runs): the repeat is one window.
    windows_s: tuple[tuple[float, float], ...] = ()
    # the client process over this repeat's measured blocks (load.client_health): {"cpu_share", "cpu_s", "wall_s",
    # "loop_lag_p99_s"}; None where not measured (compare, older runs)
    client: Mapping[str, float] | None = None
    # Another tool's run (compare): True where its records' send times are rebuilt (the file keeps none), so no
    # window of theirs was measured; `duration_s` is then the run's wall time as the tool states it (its summary),
    # which throughput divides by; with neither, the run has no throughput (`verdict.arm_level.repeat_metrics`)
    sends_rebuilt: bool = False
    duration_s: float | None = None
    # what was done to the server's caches before each block (`cache: {reset: ...}`); () = not recorded (compare,
    # older runs)
    cache_resets: tuple[CacheResetOutcome, ...] = ()

    def meta_dict(self) -> dict[str, Any]:
        """Everything except the records (they live in requests.jsonl)."""
        return json_safe(
            {
                "arm": self.arm,
                "level": self.level,
                "repeat": self.repeat,
                "acceptance": self.acceptance.to_dict() if self.acceptance is not None else None,
                "memory": [asdict(m) for m in self.memory],
                "gpu_scope": self.gpu_scope,
                "order": self.order,
                "interrupted": self.interrupted,
                "counter_deltas": dict(self.counter_deltas),
                "notes": [n.to_dict() for n in self.notes],
                "windows_s": [list(w) for w in self.windows_s],
                "client": dict(self.client) if self.client is not None else None,
                "sends_rebuilt": self.sends_rebuilt,
                "duration_s": self.duration_s,
                "cache_resets": [r.to_dict() for r in self.cache_resets],
            }
        )

    @classmethod
    def from_meta(cls, d: Mapping[str, Any], records: Sequence[RequestRecord] = ()) -> RepeatRun:
        acc = d.get("acceptance")
        return cls(
            arm=d["arm"],
            level=d["level"],
            repeat=int(d["repeat"]),
            records=tuple(records),
            acceptance=AcceptanceSummary.from_dict(acc) if acc else None,
            memory=tuple(MemorySample(**m) for m in d.get("memory", ())),
            gpu_scope=d.get("gpu_scope", ""),
            order=int(d.get("order", 0)),
            interrupted=bool(d.get("interrupted", False)),
            counter_deltas={k: float(v) for k, v in (d.get("counter_deltas") or {}).items() if v is not None},
            notes=tuple(ReportWarning.from_dict(n) for n in d.get("notes", ())),  # /1: sentences, kept as notes
            windows_s=tuple((float(a), float(b)) for a, b in d.get("windows_s") or ()),
            client=dict(d["client"]) if d.get("client") else None,
            sends_rebuilt=bool(d.get("sends_rebuilt", False)),
            duration_s=float(d["duration_s"]) if d.get("duration_s") is not None else None,
            cache_resets=tuple(CacheResetOutcome.from_dict(r) for r in d.get("cache_resets") or ()),
        )


@dataclass(frozen=True, slots=True)
class ABRun:
    """An A/B run as saved (inputs.json plus its repeats): everything the verdict is built from. `runs` may be
    incomplete: the report says what is missing."""

    setup: Setup
    arms: tuple[ArmInfo, ...]  # the baseline first, then the candidates
    changes: tuple[ChangeCheck, ...] = ()
    runs: tuple[RepeatRun, ...] = ()
    interrupted: bool = False  # the whole run stopped early
    notes: tuple[ReportWarning, ...] = ()  # lifecycle warnings for the reader (the report words them)
    diagnosis: Mapping[str, Any] | None = None  # speculab diagnose output, rendered when present
    # what was planned, as `speculab run --resume` checks it: {"sha256", "parts": {part: sha256}, "experiment"}
    # (experiment.resume.plan_identity); None for runs written before it existed, and for compare
    plan: Mapping[str, Any] | None = None
    # each arm's stream against unary sample (runs/<arm>/unary.jsonl): prompts it also answered unary after its
    # measured load, never among its measured records; {} where none was sent (and in inputs.json, which omits it)
    unary: Mapping[str, tuple[RequestRecord, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        names = [a.name for a in self.arms]
        if len(set(names)) != len(names):
            raise ValueError(f"arm names must be unique: {names}")
        if BASELINE not in names:
            raise ValueError("one arm must be named 'baseline'")

    @property
    def baseline(self) -> ArmInfo:
        return next(a for a in self.arms if a.is_baseline)

    @property
    def candidates(self) -> tuple[ArmInfo, ...]:
        return tuple(a for a in self.arms if not a.is_baseline)

    def runs_for(self, arm: str, level: str) -> tuple[RepeatRun, ...]:
        return tuple(sorted((r for r in self.runs if r.arm == arm and r.level == level), key=lambda r: r.repeat))

    def with_runs(self, runs: Sequence[RepeatRun]) -> ABRun:
        return replace(self, runs=tuple(runs))

    def setup_dict(self) -> dict[str, Any]:
        """inputs.json: everything but the per-repeat runs."""
        s = self.setup
        sd = asdict(s)
        sd["items"] = [it.to_dict() for it in s.items]
        sd["levels"] = [lv.to_dict() for lv in s.levels]
        sd["versions"] = dict(s.versions)
        return json_safe(
            {
                "schema": INPUTS_SCHEMA,
                "setup": sd,
                "arms": [a.to_dict() for a in self.arms],
                "changes": [c.to_dict() for c in self.changes],
                "interrupted": self.interrupted,
                "notes": [n.to_dict() for n in self.notes],
                "diagnosis": dict(self.diagnosis) if self.diagnosis is not None else None,
                "plan": dict(self.plan) if self.plan is not None else None,
            }
        )

    @classmethod
    def from_setup_dict(cls, d: Mapping[str, Any], runs: Sequence[RepeatRun] = ()) -> ABRun:
        if d.get("schema") not in (INPUTS_SCHEMA, INPUTS_SCHEMA_V1):
            raise ValueError(f"not a speculab report inputs file (schema {d.get('schema')!r}, want {INPUTS_SCHEMA})")
        sd = dict(d["setup"])
        sd["items"] = tuple(RequestSpec.from_dict(it) for it in sd.get("items", ()))
        sd["levels"] = tuple(LevelSpec.from_dict(lv) for lv in sd.get("levels", ()))
        sd["versions"] = dict(sd.get("versions") or {})
        known = set(Setup.__dataclass_fields__)
        setup = Setup(**{k: v for k, v in sd.items() if k in known})
        return cls(
            setup=setup,
            arms=tuple(ArmInfo.from_dict(a) for a in d["arms"]),
            changes=tuple(
                ChangeCheck.from_dict(c) for c in d.get("changes", ())
            ),  # /1 and early /2: notes as sentences
            runs=tuple(runs),
            interrupted=bool(d.get("interrupted", False)),
            notes=tuple(ReportWarning.from_dict(n) for n in d.get("notes", ())),  # /1: sentences, kept as notes
            diagnosis=d.get("diagnosis"),
            plan=d.get("plan") if isinstance(d.get("plan"), Mapping) else None,
        )
