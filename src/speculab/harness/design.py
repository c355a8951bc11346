"""What an A/B asks, fixed before anything runs: the offered loads, the arms, the setup, the single-change check.

The plan (`commands.run.plan`) builds these; the lifecycle records them in inputs.json (`harness.results`);
the verdict (`harness.verdict`) reads them back. They live here, beside the records rather than inside experiment/,
because results/ reads them and experiment/ writes results: one package above both would be a cycle.
Seconds everywhere; rates in requests per second; prices per GPU-hour.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from speculab.config.experiment import LoadPhase
from speculab.harness.records import ColdStartTimes, RequestSpec

BASELINE = "baseline"
# `LevelSpec.kind` of a load a result file does not state (and its `key`)
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class LevelSpec:
    """One offered load. `roles` says why it was run: "low", "operating" and/or "sweep", or "search" (a probe placed
    by `loads: {search: ...}`)."""

    # "concurrency" (closed loop), "rate" (open loop, requests/s) or "trace" (a trace's own arrivals); or `UNKNOWN`:
    # another tool's file that does not state its load (an LLMPerf responses file without its summary), never assumed
    # to be any load: it compares only with another whose load is unknown too (`compare`'s pairing)
    kind: str
    value: float  # the concurrency, the rate_rps, or the trace speed (1 = the recorded times); 0 for `UNKNOWN`
    roles: tuple[str, ...] = ()
    arrival: str | None = None  # rate loads: poisson | constant | gamma
    max_concurrency: int | None = None  # rate and trace loads: client-side cap
    # the first this many of the setup's items (whole conversations) are what this load sends; None: all of them.
    # A search's probe sends what a verdict needs at its load (harness.search.policy.probe_prompts), no more.
    prompts: int | None = None
    # a search's probe measured again at a load it measured before: 2, 3, ... (its own directory, the next prompts)
    attempt: int = 1
    # where in the items a probe measured again starts: after the prompts its earlier attempts sent, which a probe
    # sized from its load's spread (harness.search.policy.probe_groups) makes differ from `prompts` x (attempt - 1);
    # None: that product (every attempt the same size)
    start: int | None = None
    # A phased load (`loads: {phases: [...]}`): the schedule run as one block (kind its axis, value its peak), and the
    # window after each change judged apart (`transition_s`); its directory is "phased"
    phases: tuple[LoadPhase, ...] = ()
    transition_s: float = 0.0
    # One window of a phased load, as the verdict judges it (`verdict.phases`): "p<n>" (phase n past its
    # transition) or "t<n>" (the first `transition_s` into phase n), and its (start, end) seconds into the schedule
    window: str = ""
    window_s: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", float(self.value))  # 16 and 16.0 are one level (and one JSON form)
        if self.kind == UNKNOWN:
            if self.value != 0:  # no number stands for a load nobody stated
                raise ValueError(f"LevelSpec.value of an unknown load must be 0, got {self.value}")
            return
        if self.kind not in ("concurrency", "rate", "trace"):
            raise ValueError(f"LevelSpec.kind must be 'concurrency', 'rate' or 'trace', got {self.kind!r}")
        if not self.value > 0:
            raise ValueError(f"LevelSpec.value must be > 0, got {self.value}")

    @property
    def key(self) -> str:
        """Directory name: c<concurrency>, r<rate> or t<trace speed>, e.g. c16, r8, r0.5, t2; "phased" for a phased
        load, and a phase's window its `window` (p1, t2, ...)."""
        if self.phases:
            return "phased"
        if self.window:
            return self.window
        if self.kind == UNKNOWN:
            return UNKNOWN
        key = {"concurrency": "c", "rate": "r", "trace": "t"}[self.kind] + f"{self.value:g}"
        return key if self.attempt == 1 else f"{key}-{self.attempt}"

    @property
    def label(self) -> str:
        if self.phases:
            values = " → ".join(f"{p.value:g}" for p in self.phases[:6]) + (" → …" if len(self.phases) > 6 else "")
            return f"phased {self.kind} {values}"
        if self.window and self.window_s is not None:
            load = f"concurrency {self.value:g}" if self.kind == "concurrency" else f"{self.value:g} req/s"
            start, end = self.window_s
            into = "into " if self.window.startswith("t") else ""
            return f"{into}phase {self.window[1:]}, {load} ({start:g}–{end:g} s)"
        again = "" if self.attempt == 1 else f" (probe {self.attempt})"
        if self.kind == UNKNOWN:
            return "load not in the file"
        if self.kind == "concurrency":
            return f"concurrency {self.value:g}{again}"
        if self.kind == "trace":
            return f"trace ×{self.value:g}{again}"
        return f"{self.value:g} req/s{again}"

    @property
    def shown_at(self) -> float:
        """Where the report shows this load along its axis: its value, or a schedule window's start (time order)."""
        return self.window_s[0] if self.window_s is not None else self.value

    @property
    def open_loop(self) -> bool:
        """Sent on a schedule (a rate, or a trace's arrivals), not by a fixed number of workers."""
        return self.kind in ("rate", "trace")

    @property
    def requested_rate_rps(self) -> float | None:
        return self.value if self.kind == "rate" else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self) | {"key": self.key, "label": self.label}
        d["phases"] = [asdict(p) for p in self.phases]
        for k, default in (("prompts", None), ("attempt", 1), ("start", None), ("phases", []), ("transition_s", 0.0),
                           ("window", ""), ("window_s", None)):  # fmt: skip
            if d[k] == default:  # as before the keys existed: a fixed level's plan identity (`--resume`) is unchanged
                del d[k]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LevelSpec:
        return cls(
            d["kind"],
            float(d["value"]),
            tuple(d.get("roles", ())),
            d.get("arrival"),
            d.get("max_concurrency"),
            d.get("prompts"),
            int(d.get("attempt", 1)),
            start=d.get("start"),
            phases=tuple(
                LoadPhase(x["concurrency"], x["rate_rps"], float(x["duration_s"])) for x in d.get("phases", ())
            ),
            transition_s=float(d.get("transition_s", 0.0)),
            window=d.get("window", ""),
            window_s=tuple(d["window_s"]) if d.get("window_s") is not None else None,  # type: ignore[arg-type]
        )

    def items_of(self, items: tuple[RequestSpec, ...]) -> tuple[RequestSpec, ...]:
        """What this load sends of the setup's items: `prompts` of them, each end moved past a whole conversation (a
        turn sent without its earlier turns would lack their context); all of them when `prompts` is None or the
        workload holds no more. A probe measured again (`attempt` > 1) takes the next ones where the workload has
        them, so its units are new prompts; else the first again."""
        if self.prompts is None or self.prompts >= len(items):
            return items
        start = self.prompts * (self.attempt - 1) if self.start is None else self.start
        start = start if start + self.prompts <= len(items) else 0
        return items[_whole(items, start) : _whole(items, start + self.prompts)]


def _whole(items: tuple[RequestSpec, ...], n: int) -> int:
    """n moved past the rest of the conversation items[n - 1] belongs to."""
    while (
        0 < n < len(items)
        and items[n].conversation_id is not None
        and (items[n].conversation_id == items[n - 1].conversation_id)
    ):
        n += 1
    return n


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
    # What forces this arm's acceptance (drafts accepted by a draw, not verified), in its engine's words: from the
    # command and environment it was launched with, or what its server said it runs (`adapters.forced_by_launch`,
    # `forced_by_server`); () : nothing said so. Its acceptance is then never reported as measured.
    forced_acceptance: tuple[str, ...] = ()
    # What makes this arm's acceptance lossy by design (typical or relaxed acceptance), in its engine's words, from the
    # command it was launched with (`adapters.lossy_by_launch`); () : nothing said so. Its outputs are then judged by
    # checks, never by equality with the baseline's (verdict.correctness).
    lossy_acceptance: tuple[str, ...] = ()

    @property
    def is_baseline(self) -> bool:
        return self.name == BASELINE

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["server_info"] = dict(self.server_info)
        if not self.forced_acceptance:  # an arm nothing forces keeps its shape (and `--resume`'s plan identity)
            del d["forced_acceptance"]
        else:
            d["forced_acceptance"] = list(self.forced_acceptance)
        if not self.lossy_acceptance:  # an exact arm keeps its shape (and `--resume`'s plan identity)
            del d["lossy_acceptance"]
        else:
            d["lossy_acceptance"] = list(self.lossy_acceptance)
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
            forced_acceptance=tuple(d.get("forced_acceptance") or ()),
            lossy_acceptance=tuple(d.get("lossy_acceptance") or ()),
        )


@dataclass(frozen=True, slots=True)
class Setup:
    """What was asked: workload, sampling, loads, SLOs, arms, commands. Same for every arm but the speculation."""

    name: str
    workload_name: str
    workload_source: str
    api: str  # completions | chat
    items: tuple[RequestSpec, ...]  # the prompts, in order; checks live on them
    temperature: float | None  # None: not recorded (a vLLM bench serve file does not say)
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
    usd_per_kwh: float | None = None  # `cost: usd_per_kwh`: the price of the energy the arms drew (analysis.energy)
    checks_enabled: bool = True
    logprobs: int | None = None  # top-N logprobs requested (for divergence classification); None = not requested
    two_url_mode: bool = False
    # False: the arms did not send the same prompts (`compare` of two results whose prompts differ, or --unpaired):
    # every metric is judged from two samples (analysis.comparison.unpaired.compare_unpaired), nothing per prompt
    paired: bool = True
    # unpaired only: each arm's repeats at a load sent the same prompts in the same order, so a prompt's repeats are
    # one observation of it (the median), not independent requests; False: every request is its own sample
    repeats_same_prompts: bool = True
    # True: the arms are two separate runs compared afterwards (`speculab compare`), not interleaved by speculab
    separate_runs: bool = False
    # the command that ran the arms ("run" or "demo"; `compare` is `separate_runs`): the report's advice names a
    # setting that command has (`repeats:` is an experiment file's; the demo has none)
    command: str = "run"
    # adaptive repeats (stats.sequential): the design ({min, max, until, mdc, spending, alpha}) and, as the run
    # goes, `looks` [{repeat, alpha, decided, undecided}]; None for a fixed number of repeats
    sequential: Mapping[str, Any] | None = None
    # the experiment's `margin:` per metric ({} = the defaults): the report decides against it (ReportOptions.margin
    # overrides, as `compare --margin` does)
    margin: Mapping[str, float] = field(default_factory=dict)
    # the experiment's `decide_on:` and `guardrails:` (None: the defaults); ReportOptions overrides, as
    # `compare --decide-on` does
    decide_on: str | None = None
    guardrails: tuple[str, ...] | None = None
    # the experiment's `guardrail_floor:` per time metric, seconds ({} = the defaults); ReportOptions overrides, as
    # `compare --guardrail-floor` does
    guardrail_floor: Mapping[str, float] = field(default_factory=dict)
    started_utc: str = ""
    finished_utc: str = ""
    versions: Mapping[str, Any] = field(default_factory=dict)
    # the items fitted to the servers' context before the first request (workload.fit: policy, context, left out);
    # None: not fitted (yet)
    fit: Mapping[str, Any] | None = None
    # `loads: {search: ...}`: the design ({kind, low, high, tolerance, max_probes, groups, metric}) and, as the run
    # goes, `rounds` (each round's loads, in the order measured), `candidate` (the one followed) and `stop` (why it
    # ended); None without a search (commands.run.probing)
    search: Mapping[str, Any] | None = None
    # how many of the workload's prompts speculab synthesised (`Workload.synthesised`); None: not recorded (a run
    # before it: a `synthetic:` source still says so)
    synthesised_prompts: int | None = None
    # `run --prediction`: {file, candidates: {name: {k, tokens_per_step, crossover, curve: [[load, estimate, low,
    # high], ...]}}} (commands.run.probing.predicted); None: the run started from no prediction
    predicted: Mapping[str, Any] | None = None
    # the stream against unary check (`checks: {stream_unary: N}`): prompts each arm also sends unary after its measured
    # load (`stream_unary_sample`), at temperature 0 only; 0: none (and runs before it)
    stream_unary: int = 0


STREAM_UNARY_STREAM = 50  # the sample's own RNG stream beside the run's seed (issue 50)


def stream_unary_sample(setup: Setup) -> tuple[RequestSpec, ...]:
    """The prompts each arm also sends unary: `setup.stream_unary` of the single-turn items its first load sends (a
    conversation's later turn depends on the arm's own earlier answers), drawn with the run's seed, in workload order;
    none above temperature 0, where a stream and a unary answer may differ by design."""
    if setup.stream_unary <= 0 or setup.temperature != 0 or not setup.levels:
        return ()
    eligible = [it for it in setup.levels[0].items_of(setup.items) if it.turn is None]
    n = min(setup.stream_unary, len(eligible))
    rng = np.random.default_rng(np.random.SeedSequence([setup.seed, STREAM_UNARY_STREAM]))
    return tuple(eligible[i] for i in sorted(rng.choice(len(eligible), size=n, replace=False)))


def candidate_name(method: str, k: int) -> str:
    """Directory-safe arm name for a candidate: 'ngram-k4', 'draft_model-k4' (the plan names arms with it; the
    recommendation finds them by it)."""
    return f"{method}-k{k}"
