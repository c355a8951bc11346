"""The raw material of an A/B report: what was asked (setup, arms, loads) and what was observed per repeat.

The lifecycle (`speculab.harness.experiment`) produces these objects while it runs; the report package turns
them into a report; `ab_dir` lays them out on disk and reads them back. Nothing here is derived: only what was asked and
what was observed (records, counters, memory samples, cold start). Seconds everywhere; memory in bytes; rates in
requests per second.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from speculab.harness.records import RequestRecord, RequestSpec
from speculab.harness.results.strict_json import json_safe
from speculab.harness.servers.acceptance import AcceptanceSummary

INPUTS_SCHEMA = "speculab.report.inputs/1"
BASELINE = "baseline"


# ---------------------------------------------------------------------------------------------------------------
# Setup: what was asked.
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LevelSpec:
    """One offered load. `roles` says why it was run: "low", "operating" and/or "sweep"."""

    kind: str  # "concurrency" (closed loop), "rate" (open loop, requests/s) or "trace" (a trace's own arrivals)
    value: float  # the concurrency, the rate_rps, or the trace speed (1 = the recorded times)
    roles: tuple[str, ...] = ()
    arrival: str | None = None  # rate loads: poisson | constant | gamma
    max_concurrency: int | None = None  # rate and trace loads: client-side cap

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", float(self.value))  # 16 and 16.0 are one level (and one JSON form)
        if self.kind not in ("concurrency", "rate", "trace"):
            raise ValueError(f"LevelSpec.kind must be 'concurrency', 'rate' or 'trace', got {self.kind!r}")
        if not self.value > 0:
            raise ValueError(f"LevelSpec.value must be > 0, got {self.value}")

    @property
    def key(self) -> str:
        """Directory name: c<concurrency>, r<rate> or t<trace speed>, e.g. c16, r8, r0.5, t2."""
        return {"concurrency": "c", "rate": "r", "trace": "t"}[self.kind] + f"{self.value:g}"

    @property
    def label(self) -> str:
        if self.kind == "concurrency":
            return f"concurrency {self.value:g}"
        if self.kind == "trace":
            return f"trace ×{self.value:g}"
        return f"{self.value:g} req/s"

    @property
    def open_loop(self) -> bool:
        """Sent on a schedule (a rate, or a trace's arrivals), not by a fixed number of workers."""
        return self.kind in ("rate", "trace")

    @property
    def requested_rate_rps(self) -> float | None:
        return self.value if self.kind == "rate" else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"key": self.key, "label": self.label}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LevelSpec:
        return cls(d["kind"], float(d["value"]), tuple(d.get("roles", ())), d.get("arrival"), d.get("max_concurrency"))


@dataclass(frozen=True, slots=True)
class ColdStartTimes:
    """Launch-mode timings from process start, seconds; None where not measured."""

    ready_s: float | None = None  # process start -> health endpoint answered
    first_token_s: float | None = None  # process start -> first token of a probe request


@dataclass(frozen=True, slots=True)
class ArmInfo:
    """One arm: the baseline (`name == "baseline"`) or a candidate. Prices are per GPU-hour, gpus per replica."""

    name: str  # directory-safe: "baseline", "ngram-k4", "draft_model-k4"
    label: str  # for people: "plain", "ngram k=4"
    url: str = ""
    engine: str = "other"
    command: tuple[str, ...] | None = None  # None in URL mode
    method: str | None = None  # speculation method; None for the baseline
    num_speculative_tokens: int | None = None  # k; None for the baseline
    usd_per_hour: float | None = None
    gpus: int = 1
    cold_start: ColdStartTimes | None = None
    # What the server says about itself (/version, /v1/models, detected engine): recorded in two-URL mode,
    # where the single change cannot be verified from commands.
    server_info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_baseline(self) -> bool:
        return self.name == BASELINE

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["server_info"] = dict(self.server_info)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ArmInfo:
        cs = d.get("cold_start")
        cmd = d.get("command")
        return cls(
            name=d["name"],
            label=d.get("label", d["name"]),
            url=d.get("url", ""),
            engine=d.get("engine", "other"),
            command=tuple(cmd) if cmd is not None else None,
            method=d.get("method"),
            num_speculative_tokens=d.get("num_speculative_tokens"),
            usd_per_hour=d.get("usd_per_hour"),
            gpus=int(d.get("gpus", 1)),
            cold_start=ColdStartTimes(**cs) if cs else None,
            server_info=dict(d.get("server_info") or {}),
        )


@dataclass(frozen=True, slots=True)
class ChangeCheck:
    """The single-change rule for one candidate: the command difference and whether it is speculation only."""

    candidate: str  # ArmInfo.name
    diff_lines: tuple[str, ...]  # CommandDiff.lines()
    verified: bool | None  # True: only speculation differs; False: more differs; None: could not be verified
    note: str = ""  # e.g. "two-URL mode: commands unknown", "allowed by --allow-extra-diff"


@dataclass(frozen=True, slots=True)
class Setup:
    """What was asked: workload, sampling, loads, SLOs, arms, commands. Same for every arm but the speculation."""

    name: str
    workload_name: str
    workload_source: str
    api: str  # completions | chat
    items: tuple[RequestSpec, ...]  # the prompts, in order; checks live on them
    temperature: float
    top_p: float = 1.0
    top_k: int | None = None
    seed: int = 0
    max_tokens: int = 256
    min_tokens: int | None = None
    ignore_eos: bool = False
    levels: tuple[LevelSpec, ...] = ()  # planned, in run order
    repeats: int = 1
    slo_ttft_s: float | None = None
    slo_tpot_s: float | None = None
    slo_e2e_s: float | None = None
    slo_attainment: float = 0.9
    target_rate_rps: float | None = None
    checks_enabled: bool = True
    logprobs: int | None = None  # top-N logprobs requested (for divergence classification); None = not requested
    two_url_mode: bool = False
    # adaptive repeats (analysis.sequential): the design ({min, max, until, mdc, spending, alpha}) and, as the run
    # goes, `looks` [{repeat, alpha, decided, undecided}]; None for a fixed number of repeats
    sequential: Mapping[str, Any] | None = None
    started_utc: str = ""
    finished_utc: str = ""
    versions: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class MemorySample:
    """One memory reading during a load level. t_s is seconds since the level started."""

    t_s: float
    gpu_bytes: float | None = None  # NVML: the server's processes where known, else the whole device
    rss_bytes: float | None = None  # resident set of the server process tree (CPU engines)
    kv_usage: float | None = None  # engine KV-cache usage gauge, fraction 0..1


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
    notes: tuple[str, ...] = ()  # anything the lifecycle wants the reader to know about this repeat
    # (start, end) clock seconds of each block's measured phase, the records' clock. Two-URL mode runs an arm in
    # blocks with the other arm's in between: achieved load and throughput count these windows only
    # (`analysis.windows`). () = not recorded (compare, older runs): the repeat is one window.
    windows_s: tuple[tuple[float, float], ...] = ()
    # the client process over this repeat's measured blocks (load.client_health): {"cpu_share", "cpu_s", "wall_s",
    # "loop_lag_p99_s"}; None where not measured (compare, older runs)
    client: Mapping[str, float] | None = None

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
                "notes": list(self.notes),
                "windows_s": [list(w) for w in self.windows_s],
                "client": dict(self.client) if self.client is not None else None,
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
            notes=tuple(d.get("notes", ())),
            windows_s=tuple((float(a), float(b)) for a, b in d.get("windows_s") or ()),
            client=dict(d["client"]) if d.get("client") else None,
        )


@dataclass(frozen=True, slots=True)
class ReportInputs:
    """Everything build_report needs. `runs` may be incomplete: the report says what is missing."""

    setup: Setup
    arms: tuple[ArmInfo, ...]  # the baseline first, then the candidates
    changes: tuple[ChangeCheck, ...] = ()
    runs: tuple[RepeatRun, ...] = ()
    interrupted: bool = False  # the whole run stopped early
    notes: tuple[str, ...] = ()  # lifecycle warnings for the reader (e.g. "candidate restarted once")
    diagnosis: Mapping[str, Any] | None = None  # speculab diagnose output, rendered when present

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

    def with_runs(self, runs: Sequence[RepeatRun]) -> ReportInputs:
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
                "changes": [asdict(c) for c in self.changes],
                "interrupted": self.interrupted,
                "notes": list(self.notes),
                "diagnosis": dict(self.diagnosis) if self.diagnosis is not None else None,
            }
        )

    @classmethod
    def from_setup_dict(cls, d: Mapping[str, Any], runs: Sequence[RepeatRun] = ()) -> ReportInputs:
        if d.get("schema") != INPUTS_SCHEMA:
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
                ChangeCheck(c["candidate"], tuple(c["diff_lines"]), c["verified"], c.get("note", ""))
                for c in d.get("changes", ())
            ),
            runs=tuple(runs),
            interrupted=bool(d.get("interrupted", False)),
            notes=tuple(d.get("notes", ())),
            diagnosis=d.get("diagnosis"),
        )
