"""The mock server's script: its configuration and the pure rules it follows (tokens, lengths, chunks, text).

What a "token" is here: one word of a fixed 64-word vocabulary followed by one space ("delta "). A prompt's
token count is its number of whitespace-separated words (`len(text.split())`); a chat prompt is rendered as one
"role: content" line per message first, so each message adds one token for its role. Prompts given as token
ids count one token per id. Generated text is a pure function of the prompt and the request's `seed`
(temperature and the server's timing and speculation settings play no part), so two mock servers with different timing
or speculation settings return identical text - as exact speculative decoding would. One setting scripts text that is
not: `loop_after_tokens` N (with `loop_period` P) makes every output longer than N fall into a loop there, the P tokens
after its first N repeated to its end, at any temperature (a speculative arm that degenerates where the baseline does
not: the degeneration check's case). Up to token N + P the text is the same as without it.

The timing script, per request (all on the event loop's monotonic clock):
- queueing: with `max_concurrency`, requests beyond it wait for a slot; the wait shows up in TTFT.
- cold start: the first request after start (and after `idle_reset_s` without traffic) waits `cold_start_s`;
  requests arriving during the warm-up wait for it too, as they would for a model that is loading.
- first chunk at admitted + cold-start wait + `ttft_s` + uncached prompt tokens x `prefill_s_per_token`;
  with `serial_prefill`, the prefill work of concurrent requests is done one request at a time. A request
  admitted without waiting counts as admitted on arrival: its own set-up work never shifts its schedule.
- chunk i+1 at chunk i's deadline + `gap_s` x (1 + `decode_slowdown_per_request` x (running - 1)).
Sends are scheduled against these absolute deadlines, never as accumulated sleeps, so scheduler overshoot on
one chunk does not shift the next: gaps stay exact even with hundreds of concurrent streams.

Speculation: each chunk is one verification step (one "draft" in vLLM's counters) that yields its chunk's
tokens: accepted = tokens - 1 (the last one is the bonus token), draft tokens = `num_speculative_tokens`. So the
counters' mean acceptance length equals the mean of `tokens_per_chunk` (over whole cycles of a pattern). A step
cut short by max_tokens is still counted with its full acceptance, as vLLM counts it before truncation.
Simplification: the first chunk also counts as a verification step (a real engine's first token comes from
prefill alone).

The step-batched mode (`step_batched`, issue 49: a scripted engine whose speedup at every load and K is known) replaces
the per-stream decode rule with one engine loop per server (`speculab.mock.steps`). Every request in the batch advances
each step, one chunk per request per step, and all of a step's chunks are due at its end:
- a plain step (k = 0) costs `step_s` + `step_s_per_request` x batch and gives each request 1 token;
- a speculative step costs that + `verify_s_per_request_token` x batch x k + `draft_s_per_token` x k, and gives
  each request 1 + accepted tokens, accepted drawn position by position with the server's seeded RNG at the
  conditional rates `acceptance_rates` (the content's), stopping at the first rejection; `forced_acceptance_rates`
  (vLLM's `synthetic_acceptance_rates`: unconditional, non-increasing) replace them when set.
- the batch is the requests running on the server when the step starts (`vllm:num_requests_running`: admitted and
  not yet ended, those still in prefill included, as in an engine with chunked prefill). A request whose last chunk
  the previous step gave still counts: its handler has not ended yet, and in a closed loop its successor arrives a
  moment later. So a closed loop at concurrency c steps at batch c, which `mock.truth` assumes.
- prefill keeps the per-stream rules up to the join: queueing, cold start, `ttft_s`, prefill cost, serial prefill and
  jitter decide when a request is ready; it then joins the next step to start (at once when the loop is idle), and
  that first step gives its first token alone (the prefill's token: no drafts, no verification step counted), so
  TPOT spans whole decode steps. `gap_s` plays no part; `tokens_per_chunk` and `decode_slowdown_per_request` must
  keep their defaults.
"""

from __future__ import annotations

import enum
import hashlib
import itertools
import random
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from speculab.errors import UserError

# 64 short, distinct words. Token i of an output is VOCAB[k] + " " for a seeded k.
# fmt: off
VOCAB: tuple[str, ...] = (
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima",
    "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey",
    "xray", "yankee", "zulu", "amber", "birch", "cedar", "dune", "ember", "fern", "grove", "harbor", "island",
    "jade", "kernel", "lantern", "meadow", "nectar", "orbit", "pebble", "quartz", "river", "summit", "timber",
    "umber", "valley", "willow", "yarrow", "zephyr", "anchor", "beacon", "canyon", "mesa", "estuary", "fjord",
    "glacier", "horizon", "inlet", "jetty", "knoll", "meridian", "lagoon",
)
# fmt: on
assert len(VOCAB) == 64 and len(set(VOCAB)) == 64


class Fault(str, enum.Enum):
    """Injected failures, drawn per request from the configured rates (mutually exclusive)."""

    HTTP_5XX = "http_5xx"  # 500 with an OpenAI-style error body, before any streaming
    HTTP_429 = "http_429"  # 429 with Retry-After, before any streaming
    DROP = "drop"  # the connection is closed mid-stream, without the final chunk or [DONE]
    MALFORMED = "malformed"  # one SSE event whose data is not JSON, then the stream continues
    ERROR_EVENT = "error_event"  # an error object inside the stream, then [DONE]
    STALL = "stall"  # the stream pauses `fault_stall_s` mid-way (long enough to trip client timeouts)


def parse_chunk_pattern(text: str) -> tuple[int, ...]:
    """`--tokens-per-chunk`: N, or a per-chunk pattern like 3,1,2 (cycled)."""
    try:
        pattern = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise UserError(f"--tokens-per-chunk must be N or a pattern like 3,1,2; got {text!r}") from None
    if not pattern or min(pattern) < 1:
        raise UserError(f"--tokens-per-chunk values must be >= 1; got {text!r}")
    return pattern


@dataclass(frozen=True, slots=True)
class MockConfig:
    """The script the mock server follows. Times in seconds; rates are probabilities per request."""

    ttft_s: float = 0.1  # admitted -> first chunk, for a prompt with no prefill cost
    ttft_jitter_s: float = 0.0  # adds U[0, this) to each TTFT (seeded): concurrent streams fall out of step
    gap_s: float = 0.02  # between consecutive chunks of one stream
    tokens_per_chunk: int | tuple[int, ...] = 1  # an int, or a per-chunk pattern cycled within each request
    output_tokens: int = 128  # natural length (the mock's "EOS"); max_tokens caps it, min_tokens/ignore_eos extend it
    models: str | tuple[str, ...] = ("speculab-mock",)  # served model names; the first is the default
    max_model_len: int = 8192  # context length: prompt + output tokens must fit
    prefill_s_per_token: float = 0.0  # TTFT grows by this per uncached prompt token
    serial_prefill: bool = False  # prefills run one at a time (one compute-bound prefill engine): TTFT grows
    # with the prefill work queued ahead under load, while decode gaps stay steady
    cold_start_s: float = 0.0  # extra wait for the first request after start (and after idle_reset_s idle)
    idle_reset_s: float | None = None  # idle time after which the server is cold again; None: only at start
    max_concurrency: int | None = None  # requests beyond it queue server-side (shows as TTFT); None: unlimited
    decode_slowdown_per_request: float = 0.0  # gap x (1 + this x (running - 1)): batching slows decode
    # A switch at a load threshold (issue 52: an engine that re-plans its speculation when the batch grows, as
    # vLLM's dynamic speculation does by batch size): when the requests running rise above `switch_above`, every
    # request running then has its next chunk gap (after its first token) `switch_stall_s` longer, once. None: none
    switch_above: int | None = None
    switch_stall_s: float = 0.0
    num_speculative_tokens: int = 0  # k > 0 exposes vLLM spec-decode counters; chunks must be <= k + 1 tokens
    # k > 0: each response also carries vLLM's per-request `metrics.speculative_decoding` (its
    # --per-request-spec-decode-metrics summary), on the usage chunk when streaming, in the body otherwise
    per_request_spec_metrics: bool = False
    prefix_cache: bool = False  # cached leading blocks of a prompt cost no prefill
    prefix_cache_block_tokens: int = 16  # cache granularity in tokens (vLLM's block size)
    prefix_cache_max_blocks: int = 65536  # LRU capacity in blocks
    # vLLM's VLLM_SERVER_DEV_MODE=1: POST /reset_prefix_cache empties the prefix cache (without it: 404, as vLLM's)
    dev_mode: bool = False
    fault_5xx_rate: float = 0.0
    fault_429_rate: float = 0.0
    retry_after_s: float = 1.0  # Retry-After header of 429 faults (whole seconds on the wire, rounded up)
    fault_drop_rate: float = 0.0
    fault_malformed_rate: float = 0.0
    fault_error_event_rate: float = 0.0
    fault_stall_rate: float = 0.0
    fault_stall_s: float = 3600.0  # how long a stall lasts; long by default so it trips client timeouts
    seed: int = 0  # seeds fault draws; generated text does not depend on it
    startup_s: float = 0.0  # `serve_mock` (the CLI) waits this long before listening, like a model loading
    spin_s: float = 0.0  # yield-spin this long before each deadline instead of sleeping through it: asyncio's
    # sleeps wake 1-2 ms late (epoll waits in whole ms, and Python 3.11 rounds the timeout up twice); spinning
    # lands writes within ~0.05 ms of their deadlines, at the cost of CPU while the loop waits
    api_key: str | None = field(default=None, repr=False)  # require `Authorization: Bearer KEY` on /v1/* (401 else)
    request_receive_timeout_s: float = 30.0  # request line, headers and body must arrive within it (0: no limit)
    record_send_times: bool = False  # keep each chunk's write time (CLOCK_MONOTONIC) for GET /mock/send_times:
    # lets a benchmark separate the client's timing error from the server's own wake-up lateness
    truth_log: str | None = None  # a path: write what was done with each streamed request there (mock.truth_log)
    # the step-batched mode (module docstring): one engine loop batches every request in flight
    step_batched: bool = False
    step_s: float = 0.02  # a: every step's fixed cost
    step_s_per_request: float = 0.0  # b: per request in the batch
    verify_s_per_request_token: float = 0.0  # d: a speculative step's verification, per request x draft position
    draft_s_per_token: float = 0.0  # g: a speculative step's proposing, per draft position (a draft model's passes)
    acceptance_rates: tuple[float, ...] = ()  # the content's conditional rate at each draft position (>= k of them)
    # vLLM's synthetic_acceptance_rates: unconditional per position (P(first j+1 drafts all accepted)),
    # non-increasing, k or fewer (missing positions 0); they override acceptance_rates: a cost probe
    forced_acceptance_rates: tuple[float, ...] | None = None
    # degeneration (module docstring): after this many output tokens, the next loop_period tokens again and again;
    # None: no loop
    loop_after_tokens: int | None = None
    loop_period: int = 8  # the period-8 loop a speculative arm fell into on long prompts (issue 50)
    # a scripted streaming-path defect (vllm#30204): a streamed response leaves out its last N tokens' text (its
    # usage still counts them); the same request unary gets every token
    stream_drop_last_tokens: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.models, str):
            object.__setattr__(self, "models", (self.models,))
        if isinstance(self.tokens_per_chunk, list):
            object.__setattr__(self, "tokens_per_chunk", tuple(self.tokens_per_chunk))
        for name in ("acceptance_rates", "forced_acceptance_rates"):
            if isinstance(getattr(self, name), list):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        self._validate()

    def _validate(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise ValueError(msg)

        times = (
            "ttft_s",
            "ttft_jitter_s",
            "gap_s",
            "prefill_s_per_token",
            "cold_start_s",
            "retry_after_s",
            "fault_stall_s",
            "startup_s",
            "spin_s",
            "request_receive_timeout_s",
        )
        for name in times:
            need(getattr(self, name) >= 0, f"{name} must be >= 0, got {getattr(self, name)}")
        need(self.decode_slowdown_per_request >= 0, "decode_slowdown_per_request must be >= 0")
        need(self.switch_above is None or self.switch_above >= 1, "switch_above must be >= 1 (or None)")
        need(self.switch_stall_s >= 0, "switch_stall_s must be >= 0")
        need(not (self.step_batched and self.switch_above is not None), "switch_above applies to the paced mode")
        need(len(self.chunk_pattern) > 0, "tokens_per_chunk pattern must not be empty")
        need(all(n >= 1 for n in self.chunk_pattern), f"tokens_per_chunk values must be >= 1: {self.tokens_per_chunk}")
        need(self.output_tokens >= 1, f"output_tokens must be >= 1, got {self.output_tokens}")
        need(len(self.models) > 0 and all(self.models), "at least one non-empty model name is needed")
        need(self.max_model_len >= 2, "max_model_len must be >= 2")
        need(self.idle_reset_s is None or self.idle_reset_s > 0, "idle_reset_s must be > 0 (or None)")
        need(self.max_concurrency is None or self.max_concurrency >= 1, "max_concurrency must be >= 1 (or None)")
        need(self.num_speculative_tokens >= 0, "num_speculative_tokens must be >= 0")
        need(self.stream_drop_last_tokens >= 0, "stream_drop_last_tokens must be >= 0")
        if self.num_speculative_tokens > 0:
            need(
                max(self.chunk_pattern) <= self.num_speculative_tokens + 1,
                f"a chunk of {max(self.chunk_pattern)} tokens needs num_speculative_tokens >= "
                f"{max(self.chunk_pattern) - 1} (one verification step yields at most k + 1 tokens)",
            )
        need(self.prefix_cache_block_tokens >= 1, "prefix_cache_block_tokens must be >= 1")
        need(self.prefix_cache_max_blocks >= 1, "prefix_cache_max_blocks must be >= 1")
        rate_fields = ("fault_5xx_rate", "fault_429_rate", "fault_drop_rate", "fault_malformed_rate")
        for name in (*rate_fields, "fault_error_event_rate", "fault_stall_rate"):
            need(0 <= getattr(self, name) <= 1, f"{name} must be in [0, 1], got {getattr(self, name)}")
        total = sum(self.fault_rates.values())
        need(total <= 1 + 1e-9, f"fault rates must sum to <= 1 (one fault per request at most), got {total:g}")
        self._validate_steps(need)
        need(self.loop_period >= 1, f"loop_period must be >= 1, got {self.loop_period}")
        if self.loop_after_tokens is None:
            # a period given alone would be silently ignored
            need(
                self.loop_period == _DEFAULTS["loop_period"],
                "loop_period: set loop_after_tokens (--loop-after-tokens) too",
            )
        else:
            need(self.loop_after_tokens >= 0, f"loop_after_tokens must be >= 0, got {self.loop_after_tokens}")

    def _validate_steps(self, need: Callable[[bool, str], None]) -> None:
        """The step-batched mode's keys: each wrong value is one line naming the key."""
        costs = ("step_s", "step_s_per_request", "verify_s_per_request_token", "draft_s_per_token")
        for name in costs:
            need(getattr(self, name) >= 0, f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("acceptance_rates", "forced_acceptance_rates"):
            rates = getattr(self, name) or ()
            need(all(0 <= r <= 1 for r in rates), f"{name} must each be in [0, 1], got {list(rates)}")
        if not self.step_batched:
            step_keys = (*costs, "acceptance_rates", "forced_acceptance_rates")
            changed = [n for n in step_keys if getattr(self, n) != _DEFAULTS[n]]
            need(not changed, f"{', '.join(changed)}: step-batched settings; set step_batched (--step-batched) too")
            return
        need(self.step_s + self.step_s_per_request > 0, "step_s or step_s_per_request must be > 0 (a step takes time)")
        need(self.chunk_pattern == (1,), "tokens_per_chunk must be 1 in the step-batched mode (acceptance sets it)")
        need(
            self.decode_slowdown_per_request == 0,
            "decode_slowdown_per_request has no effect in the step-batched mode: use step_s_per_request",
        )
        k, forced = self.num_speculative_tokens, self.forced_acceptance_rates
        if forced is not None:
            need(k > 0, "forced_acceptance_rates needs num_speculative_tokens > 0")
            need(
                len(forced) <= k,
                f"forced_acceptance_rates has {len(forced)} rates, more than num_speculative_tokens ({k}) drafts",
            )
            need(
                all(b <= a for a, b in itertools.pairwise(forced)),
                f"forced_acceptance_rates must be non-increasing (unconditional rates), got {list(forced)}",
            )
        else:
            need(
                len(self.acceptance_rates) >= k,
                f"acceptance_rates has {len(self.acceptance_rates)} rates for num_speculative_tokens = {k}: give one "
                "conditional rate per draft position",
            )

    @property
    def chunk_pattern(self) -> tuple[int, ...]:
        """Tokens per chunk as a pattern (a single int is a pattern of one)."""
        tpc = self.tokens_per_chunk
        return (tpc,) if isinstance(tpc, int) else tuple(tpc)

    @property
    def mean_tokens_per_chunk(self) -> float:
        p = self.chunk_pattern
        return sum(p) / len(p)

    @property
    def fault_rates(self) -> dict[Fault, float]:
        return {
            Fault.HTTP_5XX: self.fault_5xx_rate,
            Fault.HTTP_429: self.fault_429_rate,
            Fault.DROP: self.fault_drop_rate,
            Fault.MALFORMED: self.fault_malformed_rate,
            Fault.ERROR_EVENT: self.fault_error_event_rate,
            Fault.STALL: self.fault_stall_rate,
        }


_DEFAULTS = {f.name: f.default for f in fields(MockConfig)}


# --------------------------------------------------------------------------------------------------------------
# Pure pieces: the step-batched mode's cost and acceptance rules


def step_s(cfg: MockConfig, batch: int) -> float:
    """One step's duration in seconds with `batch` requests in the batch (at least one): a + b x batch, plus
    d x batch x k + g x k when the server speculates (k = num_speculative_tokens > 0)."""
    b, k = max(batch, 1), cfg.num_speculative_tokens
    t = cfg.step_s + cfg.step_s_per_request * b
    if k > 0:
        t += cfg.verify_s_per_request_token * b * k + cfg.draft_s_per_token * k
    return t


def conditional_acceptance(cfg: MockConfig) -> tuple[float, ...]:
    """The conditional acceptance rate at each of the k draft positions. Forced rates are unconditional, so they are
    turned into conditional ones as vLLM's synthetic sampler does (c_j = p_j / p_(j-1), 0 after a 0; positions
    beyond the given ones 0); otherwise the content's `acceptance_rates`."""
    k, forced = cfg.num_speculative_tokens, cfg.forced_acceptance_rates
    if forced is None:
        return tuple(cfg.acceptance_rates[:k])
    p = (*forced, *(0.0,) * (k - len(forced)))
    return tuple(pj / q if q > 0 else 0.0 for pj, q in zip(p, (1.0, *p[:-1]), strict=True))


def draw_accepted(rates: tuple[float, ...], rng: random.Random) -> int:
    """Draft tokens accepted in one verification step: drawn position by position at the conditional `rates`, up
    to the first rejection (so the accepted ones are always the leading positions, as the counters assume)."""
    accepted = 0
    for rate in rates:
        if rng.random() >= rate:
            break
        accepted += 1
    return accepted


# --------------------------------------------------------------------------------------------------------------
# Pure pieces: tokens, output plan, chunking, text


def count_tokens(text: str) -> int:
    """The mock's token count of a text: whitespace-separated words."""
    return len(text.split())


def render_chat(messages: list[dict[str, Any]]) -> str:
    """One "role: content" line per message; list contents keep their text parts only."""
    lines = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        lines.append(f"{m.get('role', 'user')}: {content or ''}")
    return "\n".join(lines)


def plan_output(
    cfg: MockConfig, prompt_tokens: int, max_tokens: int | None, min_tokens: int = 0, ignore_eos: bool = False
) -> tuple[int, str]:
    """(output tokens, finish_reason): the natural length `cfg.output_tokens`, raised to min_tokens, capped by
    max_tokens and the context; ignore_eos generates up to the cap. "length" when the cap cut it."""
    cap = cfg.max_model_len - prompt_tokens
    if max_tokens is not None:
        cap = min(cap, max_tokens)
    natural = cap if ignore_eos else max(cfg.output_tokens, min_tokens)
    if natural >= cap:
        return cap, "length"
    return natural, "stop"


def chunk_sizes(pattern: tuple[int, ...], n_tokens: int) -> list[int]:
    """Split n_tokens into chunks following the cycled pattern; the last chunk is cut to fit."""
    sizes: list[int] = []
    left, i = n_tokens, 0
    while left > 0:
        n = min(pattern[i % len(pattern)], left)
        sizes.append(n)
        left -= n
        i += 1
    return sizes


def _text_seed(prompt_text: str, seed: int | None) -> int:
    digest = hashlib.sha256(f"{prompt_text}\x00{seed}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def generate_tokens(prompt_text: str, seed: int | None, n: int) -> list[str]:
    """The n output tokens ("word ") for this prompt and seed: deterministic, independent of timing settings."""
    rng = random.Random(_text_seed(prompt_text, seed))
    return [VOCAB[rng.randrange(len(VOCAB))] + " " for _ in range(n)]


def scripted_tokens(cfg: MockConfig, prompt_text: str, seed: int | None, n: int) -> list[str]:
    """The n output tokens this server gives: `generate_tokens`', or with `loop_after_tokens` N the first N of them,
    then the P (`loop_period`) after them repeated to the end."""
    after, period = cfg.loop_after_tokens, cfg.loop_period
    if after is None or n <= after:
        return generate_tokens(prompt_text, seed, n)
    fresh = generate_tokens(prompt_text, seed, min(n, after + period))
    return fresh[:after] + [fresh[after + (i - after) % period] for i in range(after, n)]


def streamed_tokens(tokens: list[str], drop_last: int) -> list[str]:
    """The tokens' text as a stream sends it: the last `drop_last` left empty (a scripted streaming-path defect; the
    chunks still come, as many and when they would)."""
    keep = max(len(tokens) - drop_last, 0)
    return tokens[:keep] + [""] * (len(tokens) - keep)


def token_logprobs(prompt_text: str, seed: int | None, tokens: list[str], top: int) -> list[dict[str, Any]]:
    """Deterministic logprobs: the chosen token is always the most likely of its `top` alternatives."""
    rng = random.Random(_text_seed(prompt_text, seed) ^ 0x5EED)
    out = []
    for tok in tokens:
        lp = -0.05 - 1.5 * rng.random()
        alts = {tok: lp}
        k = 0
        while len(alts) < top:
            alt = VOCAB[rng.randrange(len(VOCAB))] + " "
            if alt not in alts:
                k += 1
                alts[alt] = lp - 0.5 * k - rng.random()
        out.append({"token": tok, "logprob": lp, "top": alts if top else {}})
    return out


class PrefixCache:
    """Block-hash prefix cache: a prompt's leading full blocks that were seen before cost no prefill (LRU)."""

    def __init__(self, block_tokens: int, max_blocks: int):
        self.block_tokens, self.max_blocks = block_tokens, max_blocks
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def clear(self) -> None:
        self._blocks.clear()

    def lookup_and_insert(self, tokens: list[str]) -> int:
        """Cached tokens for this prompt (at least one token is always computed); then cache its blocks."""
        b = self.block_tokens
        h, hit_blocks, still_hitting = 0, 0, True
        for start in range(0, len(tokens) - b + 1, b):
            h = hash((h, tuple(tokens[start : start + b])))
            if still_hitting and h in self._blocks:
                hit_blocks += 1
                self._blocks.move_to_end(h)
            else:
                still_hitting = False
                self._blocks[h] = None
                if len(self._blocks) > self.max_blocks:
                    self._blocks.popitem(last=False)
        return min(hit_blocks * b, max(len(tokens) - 1, 0))
