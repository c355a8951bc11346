"""Frozen records of what was asked and what was observed, one request at a time.

Raw events only: arrival times of chunks, their text and token counts, usage and errors. Every derived
number (TTFT, TPOT, gaps, stalls) is computed later by pure functions in `speculab.harness.analysis.metrics`.
All times are seconds on one monotonic clock (`time.perf_counter` in production, scripted in tests).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import Any


class ErrorCategory(str, Enum):
    """Why a request failed; the report counts errors by these."""

    HTTP = "http"  # a non-2xx status before any body was streamed
    TIMEOUT = "timeout"  # the per-request timeout expired
    CONNECT = "connect"  # the connection could not be made (refused, DNS, TLS)
    DROPPED = "dropped"  # the connection closed mid-stream before [DONE] / finish_reason
    MALFORMED = "malformed"  # the stream or body could not be parsed as the OpenAI format
    ERROR_EVENT = "error_event"  # the server sent an error object inside the stream
    CANCELLED = "cancelled"  # the run was interrupted (Ctrl-C) while the request was in flight


class TokenCountSource(str, Enum):
    """Where per-chunk token counts came from, best first."""

    CONTINUOUS_USAGE = "continuous_usage"  # usage.completion_tokens on every chunk (vLLM, speculab)
    LOGPROBS = "logprobs"  # one logprob entry per token in each chunk
    TOKENIZER = "tokenizer"  # a local tokenizer applied to each chunk's text
    ONE_PER_CHUNK = "one_per_chunk"  # nothing better: assume one token per chunk (flagged in reports)
    NONE = "none"  # non-streaming: no chunks to count
    # read from another tool's result file (harness.imports; the run says which tool and file): the request's total
    # tokens as the file states them, per-chunk counts unknown; what else the file keeps is its reader's to say
    RESULT_FILE = "result_file"

    @classmethod
    def _missing_(cls, value: object) -> TokenCountSource | None:
        """Records saved before one source served every file named the tool's (`vllm_bench_file`, ...)."""
        return cls.RESULT_FILE if value in _RESULT_FILES_BEFORE else None


# what RESULT_FILE was called, one per tool, in records saved before it (still read as it)
_RESULT_FILES_BEFORE = frozenset(
    {"vllm_bench_file", "guidellm_file", "aiperf_file", "sglang_bench_file", "llmperf_file"}
)


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request of a workload: the same in every arm and every repeat."""

    index: int  # position in the workload, 0-based; also the pairing key across arms
    prompt: str | None = None  # /v1/completions
    messages: tuple[dict[str, Any], ...] | None = None  # /v1/chat/completions
    max_tokens: int | None = None  # per-item override of the run's max_tokens
    category: str | None = None  # e.g. "code-edit", "open-qa": reports break results down by it
    seed: int | None = None  # per-request sampling seed, derived from the run seed and index
    checks: tuple[dict[str, Any], ...] = ()  # correctness checks for this item (see workload.checks)
    expected_output_tokens: int | None = None  # synthetic workloads: the length we asked the generator for
    prompt_id: str = ""  # stable id from the source file when it has one
    # Multi-turn conversations (workload.conversation): every turn is a request of its own. Turn 1 carries the
    # conversation's opening messages; turn k > 1 only what it adds (its user message, or for completions its
    # rendered text), and the load runner sends it after turn k-1 finished, behind that turn's own answer.
    conversation_id: str | None = None
    turn: int | None = None  # 1-based; None for a single-turn item
    # Traces (workload.files.trace): when this request arrived in the trace, seconds after its first request; the load
    # runner replays the arrivals (LoadConfig.trace_speed). None for every other workload.
    arrival_s: float | None = None
    # Structured outputs: OpenAI's `response_format` the request sends ({"type": "json_schema", "json_schema": {...}}
    # or {"type": "json_object"}), whose validity the verdict judges per arm (workload.checks.structured_output);
    # None: the item asks for none
    response_format: Mapping[str, Any] | None = None

    def context_sha256(self) -> str:
        """sha256 of what this request sends (its prompt, or its messages as canonical JSON): for a conversation's
        later turn, the earlier turns with the arm's own answers."""
        if self.prompt is not None:
            data = self.prompt.encode("utf-8", "surrogatepass")
        else:
            data = json.dumps(self.messages, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")
        return hashlib.sha256(data).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.turn is None:  # single-turn items keep their shape
            del d["conversation_id"], d["turn"]
        if self.arrival_s is None:
            del d["arrival_s"]
        if self.response_format is None:  # items without one keep their shape (and `--resume`'s plan identity)
            del d["response_format"]
        else:
            d["response_format"] = dict(self.response_format)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestSpec:
        msgs = d.get("messages")
        return cls(
            index=int(d["index"]),
            prompt=d.get("prompt"),
            messages=tuple(msgs) if msgs is not None else None,
            max_tokens=d.get("max_tokens"),
            category=d.get("category"),
            seed=d.get("seed"),
            checks=tuple(d.get("checks") or ()),
            expected_output_tokens=d.get("expected_output_tokens"),
            prompt_id=d.get("prompt_id", ""),
            conversation_id=d.get("conversation_id"),
            turn=d.get("turn"),
            arrival_s=d.get("arrival_s"),
            response_format=d.get("response_format"),
        )


@dataclass(frozen=True, slots=True)
class ChunkEvent:
    """One streamed chunk that carried generated text."""

    t_s: float  # arrival time on the monotonic clock, seconds
    text: str
    n_tokens: int | None  # tokens in this chunk, if knowable (see RequestRecord.token_count_source)


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    category: ErrorCategory
    message: str
    status: int | None = None  # HTTP status when there was one


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """Everything observed about one request. Written to requests.jsonl as soon as it finishes."""

    index: int  # RequestSpec.index
    scheduled_s: float  # when the load generator wanted to send it
    sent_s: float  # when the request actually left (after client-side queueing)
    end_s: float  # when the response (or the failure) was complete, trailing usage chunk included
    chunks: tuple[ChunkEvent, ...] = ()  # text-carrying chunks in arrival order; () if not streaming
    output_text: str = ""
    prompt_tokens: int | None = None  # server usage
    completion_tokens: int | None = None  # server usage; None when the server gave none
    token_count_source: TokenCountSource = TokenCountSource.NONE
    finish_reason: str | None = None
    error: ErrorInfo | None = None
    warmup: bool = False  # warmup requests are recorded but excluded from results
    stream: bool = True
    # Per-response speculative-decoding stats when the server reports them, read by the engine's adapter from its
    # own fields (`ResponseReading`): {"drafts", "draft_tokens", "accepted_tokens", "source"} (+
    # "accepted_per_position" where the engine gives a histogram); None where not reported. Its key in
    # requests.jsonl is "spec", as it always was.
    speculation: dict[str, Any] | None = None
    # Token logprobs when requested: list of {"token": str, "logprob": float, "top": {tok: lp}}
    logprobs: tuple[dict[str, Any], ...] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # server-specific fields worth keeping
    # Conversation turns only: which conversation and turn, and the sha256 of the context actually sent (the
    # earlier turns with this arm's own answers). Pairing across arms compares it: a turn whose context differs
    # between arms is not a pair of the same prompt (analysis.groups.diverged_indices).
    conversation_id: str | None = None
    turn: int | None = None
    context_sha256: str | None = None
    # False: `chunks` holds only the first and the last token's times, all a result file keeps (GuideLLM, LLMPerf,
    # SGLang's native backend): no chunk gap, tokens per chunk, per-token ITL or stall is known, and none is made
    # up from the one span between them (harness.imports)
    all_chunks: bool = True

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def cancelled(self) -> bool:
        """The run was interrupted while it was in flight: it counts as neither sent nor failed (docs/bench.md),
        since it says nothing about the endpoint."""
        return self.error is not None and self.error.category is ErrorCategory.CANCELLED

    @property
    def queue_s(self) -> float:
        """Client-side queueing: scheduled -> sent. Large values mean the client fell behind."""
        return self.sent_s - self.scheduled_s

    def shifted(self, dt: float) -> RequestRecord:
        """The same record with every time `dt` later: a record timed on another host's clock, put on this one
        (load.clock_sync). Durations (TTFT, gaps, E2E) are unchanged."""
        return replace(
            self,
            scheduled_s=self.scheduled_s + dt,
            sent_s=self.sent_s + dt,
            end_s=self.end_s + dt,
            chunks=tuple(replace(c, t_s=c.t_s + dt) for c in self.chunks),
        )

    def to_dict(self) -> dict[str, Any]:
        """requests.jsonl's line: the fields in their order, `speculation` under its key "spec", in its place, as
        since the first release. Built field by field: `dataclasses.asdict` (a recursive deep copy of every chunk)
        took 221 us for a 17-chunk record against 10 us this way, a cost the client pays between a request's end and
        the next send (tests/unit/harness/test_records.py holds this to asdict's output)."""
        error = self.error
        d: dict[str, Any] = {
            "index": self.index,
            "scheduled_s": self.scheduled_s,
            "sent_s": self.sent_s,
            "end_s": self.end_s,
            "chunks": tuple({"t_s": c.t_s, "text": c.text, "n_tokens": c.n_tokens} for c in self.chunks),
            "output_text": self.output_text,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "token_count_source": self.token_count_source.value,
            "finish_reason": self.finish_reason,
            "error": None
            if error is None
            else {"category": error.category.value, "message": error.message, "status": error.status},
            "warmup": self.warmup,
            "stream": self.stream,
            "spec": copy.deepcopy(self.speculation),  # the engine's own values: the caller may not change the record's
            "logprobs": copy.deepcopy(self.logprobs),
            "extra": copy.deepcopy(self.extra),
        }
        if self.turn is not None:  # single-turn records keep their shape
            d.update(conversation_id=self.conversation_id, turn=self.turn, context_sha256=self.context_sha256)
        if not self.all_chunks:  # records with every chunk keep their shape
            d["all_chunks"] = False
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        err = d.get("error")
        return cls(
            index=d["index"],
            scheduled_s=d["scheduled_s"],
            sent_s=d["sent_s"],
            end_s=d["end_s"],
            chunks=tuple(ChunkEvent(**c) for c in d.get("chunks", ())),
            output_text=d.get("output_text", ""),
            prompt_tokens=d.get("prompt_tokens"),
            completion_tokens=d.get("completion_tokens"),
            token_count_source=TokenCountSource(d.get("token_count_source", "none")),
            finish_reason=d.get("finish_reason"),
            error=None if err is None else ErrorInfo(ErrorCategory(err["category"]), err["message"], err.get("status")),
            warmup=d.get("warmup", False),
            stream=d.get("stream", True),
            speculation=d.get("spec", d.get("speculation")),
            logprobs=tuple(d["logprobs"]) if d.get("logprobs") is not None else None,
            extra=d.get("extra", {}),
            conversation_id=d.get("conversation_id"),
            turn=d.get("turn"),
            context_sha256=d.get("context_sha256"),
            all_chunks=d.get("all_chunks", True),
        )


# ---------------------------------------------------------------------------------------------------------------
# What a launched server and the memory sampler record beside the requests.
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResponseReading:
    """What an engine's adapter read from one response's own fields (`EngineAdapter.read_response`): its speculation
    counts in `RequestRecord.speculation`'s shape (None: not reported; a count it did not report is None, never
    derived), and the fields its record keeps raw in `extra` (bounded, checked where sums read them)."""

    speculation: dict[str, Any] | None = None
    kept: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ColdStartTimes:
    """Launch-mode timings from process start, seconds; None where not measured."""

    ready_s: float | None = None  # process start -> health endpoint answered
    first_token_s: float | None = None  # process start -> first token of a probe request


@dataclass(frozen=True, slots=True)
class MemorySample:
    """One memory reading during a load level. t_s is seconds since the level started."""

    t_s: float
    gpu_bytes: float | None = None  # NVML: the server's processes where known, else the whole device
    rss_bytes: float | None = None  # resident set of the server process tree (CPU engines)
    kv_usage: float | None = None  # engine KV-cache usage gauge, fraction 0..1
    gpu_power_w: float | None = None  # NVML board power, summed over the visible GPUs (watts); None: no NVML device
    # the engine's speculation counters at this moment, where its adapter names them (servers.memory.spec_counters):
    # "draft_tokens", "accepted_tokens", and "k=<k>" (decode steps that speculated k tokens); {}: none read
    spec_counters: Mapping[str, float] = field(default_factory=dict)


# Where an acceptance's numbers come from (`AcceptanceSummary.provenance`): the engine verified the drafts against the
# target, on the content sent ("measured"), or it accepted them by a draw to set rates (vLLM's synthetic rejection
# sampler, SGLang's SGLANG_SIMULATE_ACC_LEN, speculab's --forced-acceptance-rates): a cost probe, never the content's
MEASURED, FORCED = "measured", "forced"


@dataclass(frozen=True, slots=True)
class AcceptanceSummary:
    source: str  # e.g. "vllm:spec_decode_* counters (server-wide delta)"; reports print it beside the numbers
    active: bool  # False: no drafts at all -> the verdict is "speculation not active"
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    acceptance_rate: float | None = None
    acceptance_length: float | None = None
    per_position: tuple[float, ...] = ()
    approximate: bool = False  # gauges or a k assumption were involved
    provenance: str = MEASURED  # MEASURED | FORCED; a file written before it: measured
    # FORCED: what said so, in the engine's own words (its gauge, its responses' field; in the verdict's view of an
    # arm, also what it was started with); () otherwise
    forced_by: tuple[str, ...] = ()

    @property
    def forced(self) -> bool:
        return self.provenance == FORCED

    def to_dict(self) -> dict[str, Any]:
        """The A/B run.json form (`from_dict` reads it back)."""
        d = asdict(self)
        d["per_position"] = list(self.per_position)
        d["forced_by"] = list(self.forced_by)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AcceptanceSummary:
        return cls(
            source=d["source"],
            active=bool(d["active"]),
            drafts=d.get("drafts"),
            draft_tokens=d.get("draft_tokens"),
            accepted_tokens=d.get("accepted_tokens"),
            acceptance_rate=d.get("acceptance_rate"),
            acceptance_length=d.get("acceptance_length"),
            per_position=tuple(d.get("per_position") or ()),
            approximate=bool(d.get("approximate", False)),
            provenance=str(d.get("provenance") or MEASURED),
            forced_by=tuple(d.get("forced_by") or ()),
        )

    def to_spec_decode_dict(self) -> dict[str, Any]:
        """The bench summary.json form, `server.spec_decode` (counts as integers; None where not reported)."""
        return {
            "acceptance_rate": self.acceptance_rate,
            "acceptance_length": self.acceptance_length,
            "per_position": list(self.per_position),
            "num_drafts": _count(self.drafts),
            "num_draft_tokens": _count(self.draft_tokens),
            "num_accepted_tokens": _count(self.accepted_tokens),
            "source": self.source,
            "provenance": self.provenance,
            "forced_by": list(self.forced_by),
        }

    @classmethod
    def from_spec_decode_dict(cls, d: Mapping[str, Any] | None) -> AcceptanceSummary | None:
        """A bench summary's `server.spec_decode` (None: nothing reported) -> AcceptanceSummary; no drafts counted
        -> `active=False` (the "speculation not active" gate)."""
        if d is None:
            return None
        drafts = d.get("num_drafts")
        active = bool(drafts) if drafts is not None else bool((d.get("acceptance_length") or 0) > 1)
        return cls(
            source=str(d.get("source", "server metrics")),
            active=active,
            drafts=drafts,
            draft_tokens=d.get("num_draft_tokens"),
            accepted_tokens=d.get("num_accepted_tokens"),
            acceptance_rate=d.get("acceptance_rate"),
            acceptance_length=d.get("acceptance_length"),
            per_position=tuple(d.get("per_position") or ()),
            approximate=drafts is None,
            provenance=str(d.get("provenance") or MEASURED),
            forced_by=tuple(d.get("forced_by") or ()),
        )


def _count(v: float | None) -> int | None:
    return None if v is None else round(v)


@dataclass(frozen=True, slots=True)
class CacheResetOutcome:
    """What was done to a server's caches just before one block's measured requests (`cache: {reset: ...}`).

    outcome: "reset" (every endpoint answered 2xx), "refused" (one answered otherwise, or not at all: `detail` says
    how), "unavailable" (the engine has no such endpoint), "off" (`cache: {reset: never}`)."""

    block: int  # the block's number in its level
    outcome: str
    endpoints: tuple[str, ...] = ()  # the paths POSTed, in order
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"block": self.block, "outcome": self.outcome, "endpoints": list(self.endpoints), "detail": self.detail}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> CacheResetOutcome:
        return cls(int(d["block"]), str(d["outcome"]), tuple(d.get("endpoints") or ()), str(d.get("detail") or ""))
