"""The adapter interface every engine implements, and what adapters share."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from speculab.config import SpeculationConfig
from speculab.errors import UserError
from speculab.harness.records import AcceptanceSummary, RequestRecord, ResponseReading
from speculab.harness.servers.adapters.flags import CommandDiff, command_diff, is_speculation_flag, parse_command
from speculab.protocol.chunks import EngineFields, as_count


@dataclass(frozen=True, slots=True)
class AcceptanceMetrics:
    """Where an engine reports speculative acceptance, and how.

    kind: "counters" (Prometheus counters diffed before/after a load level: exact, server-wide),
          "gauges" (a recent-window average the server computes: approximate),
          "per_response" (fields in each response body: exact, per request),
          "histogram" (a Prometheus histogram of accepted tokens per step).
    """

    kind: str
    drafts: str | None = None  # counter: verification steps (vLLM semantics: one per request per step)
    draft_tokens: str | None = None  # counter: tokens proposed
    accepted_tokens: str | None = None  # counter: tokens accepted
    accepted_per_position: str | None = None  # counter with a `position` label
    accept_length_gauge: str | None = None
    accept_rate_gauge: str | None = None
    # counter with a `k` label: decode steps by the number of speculative tokens the engine chose for them (an
    # engine that adapts k, the reference engine's adaptive k); the k in use over a phased load (verdict.phases)
    steps_by_k: str | None = None
    # meaning -> dotted path in the response: where its `read_response` finds each count (what docs/engines.md says)
    response_fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PrefixCacheMetrics:
    """Where an engine counts prefix-cache lookups, in prompt tokens (Prometheus counters, diffed around a level).

    hits: tokens found in the cache. queries: tokens looked up; or, for engines that count the rest instead,
    misses: tokens computed (queries = hits + misses)."""

    hits: str
    queries: str | None = None
    misses: str | None = None


@dataclass(frozen=True, slots=True)
class CacheReset:
    """How an engine empties its caches between blocks, so no block is served from a cache warmed by the blocks
    before it: the endpoints POSTed (in order), and what a launched server's environment needs for them to exist."""

    paths: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)


# --- how an engine's installed release says which speculation methods it has (read by `servers.methods`) --------
# A Python engine is asked through its package's source (`PythonRelease`: which files declare its methods and its
# speculation config's keys); an executable through its `--help` and `--version` (`HelpRelease`: the parsers of its
# own text). `KnownMethods` is speculab's own list for a release, used when the engine cannot be asked (a server
# behind a URL), labelled with the release it was checked against.


@dataclass(frozen=True, slots=True)
class PythonRelease:
    """Where a Python engine's package declares its methods: each source is (file inside the package, what declares
    it: `methods.declared.read_declared`'s symbol). Every layout a release may have is listed; what each file found
    declares is joined, in order."""

    package: str  # the import name
    dists: tuple[str, ...]  # distribution names for the version, tried in order
    method_sources: tuple[tuple[str, str], ...]
    option_sources: tuple[tuple[str, str], ...]  # where the keys or flags of its speculation config are
    # method -> the module it imports at start-up that the engine does not depend on (vLLM 0.32's
    # `_validate_suffix_decoding`: "Arctic Inference is required for suffix decoding"): without it the method is a "no"
    requires: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HelpRelease:
    """An executable's own words: the methods its `--help` lists, the speculation flags it has (given the help and
    those methods), the release its `--version` says (None: it says none)."""

    methods: Callable[[str], tuple[str, ...]]
    option_flags: Callable[[str, tuple[str, ...]], tuple[str, ...]]
    release: Callable[[str], str | None]


@dataclass(frozen=True, slots=True)
class KnownMethods:
    """speculab's list of an engine's methods: the release it was read from, where, and the methods."""

    release: str
    where: str
    methods: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HeadsFromTarget:
    """An engine that runs head methods only from the checkpoint it serves, whose config names the base model loaded
    under the heads (TGI's Medusa heads and MLP speculator): which methods, and its words for the sentences that say
    so (`methods.table`)."""

    methods: frozenset[str]
    name: str  # the engine as a sentence names it
    model_flag: str  # the flag that names the checkpoint it serves
    k_flag: str  # the flag that sets k, at most the heads the checkpoint ships


def stripped_release(text: str) -> str | None:
    """A `--version` whose whole text is the release."""
    return text.strip() or None


@dataclass(frozen=True, slots=True)
class ByLoad:
    """A recommendation whose choice changes with the batch size, for an engine to spell in one command
    (`experiment.recommended`)."""

    form: str  # "off-above": the lowest band speculates, every other is plain; else a choice per band
    first: SpeculationConfig  # the lowest band's candidate
    off_above: int  # the lowest band's last batch size
    top_k: int  # the largest k among the chosen candidates
    same: bool  # every chosen candidate is one method with one model: only k changes between bands
    schedule: list[list[int]]  # [[first batch size, last, k], ...] from 1 upwards (plain: k 0)
    version: str  # the engine's release, "" when unknown


def no_candidate(adapter: EngineAdapter, baseline_cmd: Sequence[str], speculation: SpeculationConfig) -> list[str]:
    """An engine whose speculation speculab cannot switch on: the experiment file gives the candidate."""
    raise UserError(
        f"engine `{adapter.kind}`: speculab cannot derive the candidate; give candidate.command in the file"
    )


def no_launch(model: str, port: int, context: int | None) -> list[str] | None:
    """An engine whose launch command speculab cannot guess."""
    return None


def no_files(baseline_cmd: Sequence[str], speculation: SpeculationConfig) -> Mapping[str, str]:
    """An engine whose candidate command names no file speculab writes."""
    return {}


def no_load_form(b: ByLoad) -> tuple[SpeculationConfig, str, tuple[str, ...]] | None:
    """An engine with no load-dependent form of speculation."""
    return None


def no_response_fields(said: EngineFields) -> ResponseReading | None:
    """An engine whose responses carry no fields of its own."""
    return None


def no_window_acceptance(records: Sequence[RequestRecord], k: int | None) -> AcceptanceSummary | None:
    """An engine whose responses' counts, where it has any, are whole (`servers.acceptance.from_responses` sums
    them) or absent."""
    return None


def no_forced_launch(command: Sequence[str], env: Mapping[str, str]) -> tuple[str, ...]:
    """An engine with no knob that forces acceptance."""
    return ()


def no_lossy_launch(command: Sequence[str]) -> tuple[str, ...]:
    """An engine with no lossy acceptance mode speculab knows of."""
    return ()


# "Not this engine": what a record says about what an engine lacks. A shared read-only mapping, so that a default
# cannot be changed through one record and seen in another (a dataclass takes it only through a factory).
_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _none() -> Mapping[str, Any]:
    return _EMPTY


NO_ACCEPTANCE = AcceptanceMetrics(kind="none")


@dataclass(frozen=True, slots=True)
class EngineAdapter:
    """What speculab needs to know about one engine kind: everything engine-specific lives in its adapter.

    One record for every engine; each default says "not this engine" (no metrics, no speculation flags, no way to
    ask its release), so an engine module lists only what its engine has, and its hooks (`candidate`, `launch`,
    `load_form`: functions, called through `candidate_command`, `launch_command` and `by_load`)."""

    kind: str
    executable: str  # what launches it when no command is given
    health_path: str = "/health"
    # its own words in its log for a port it could not bind, beyond the OS's (servers.process.PORT_TAKEN_SIGNS): a
    # launch on a port speculab chose then moves to another
    port_taken_signs: tuple[str, ...] = ()
    metric_prefix: str | None = None  # its Prometheus names' prefix, the surest sign of it behind a URL (detect.py)
    acceptance: AcceptanceMetrics = NO_ACCEPTANCE
    # its /metrics has vLLM's latency histograms and prompt counters under its prefix (time_to_first_token_seconds,
    # prompt_tokens_total, ...), which the diagnosis reads per phase
    latency_histograms: bool = False
    prefix_cache: PrefixCacheMetrics | None = None  # None: the engine exposes no prefix-cache counters
    kv_usage_gauges: tuple[str, ...] = ()  # its KV-cache usage gauges (fraction 0..1), first present wins
    cache_reset: CacheReset | None = None  # None: it has no endpoint that empties its caches
    # body fields every request carries to ask for the engine's per-response acceptance ({}: none needed)
    request_fields: Mapping[str, Any] = field(default_factory=_none)
    keep_alive: bool = True  # False: the server drops keep-alive connections after streamed responses
    speculation_flags: frozenset[str] = frozenset()  # exact flags that belong to speculation
    speculation_prefixes: tuple[str, ...] = ()  # any flag starting with one of these belongs to speculation
    aliases: Mapping[str, str] = field(default_factory=_none)  # alternate spellings -> canonical flag
    # a speculation flag whose value switches speculation off (TGI's --speculate 0)
    plain_values: Mapping[str, str] = field(default_factory=_none)
    context_flags: tuple[str, ...] = ()  # the flags that set the context length on its command line
    # `speculab init`'s starter: the `speculation:` list (YAML lines) for this engine; None: a two-URL starter
    starter_grid: str | None = None
    starter_note: str | None = None  # a line that opens its `speculation:` list, whichever list is written
    ngram_lookup: bool = False  # its n-gram takes prompt_lookup_max/min
    json_config: bool = False  # its speculation config is --speculative-config JSON keys, not flags
    # its own method names -> speculab's experiment names; None: it names methods as an experiment does
    experiment_names: Mapping[str, str] | None = None
    fixed_k: Mapping[str, int] = field(default_factory=_none)  # methods that draft a fixed k, which no flag sets
    heads_from_target: HeadsFromTarget | None = None  # head methods it runs only from the served checkpoint (TGI)
    draft_vocab_prefix: str | None = None  # why it takes a draft whose vocabulary extends the target's; None: unknown
    lookup_keys_checked: bool = False  # prompt_lookup_max/min are checked against its release as options are (SGLang)
    declares: PythonRelease | HelpRelease | None = None  # how its release declares methods; None: it cannot be asked
    known_methods: KnownMethods | None = None  # speculab's list for a server that cannot be asked; None: none
    server_lists_methods: bool = False  # its /version lists its methods (speculative_methods)
    # its /version says what it runs: `speculative_config` (vLLM keys; null: plain) and `server_args` (`served`)
    says_config: bool = False
    # the hooks: the baseline with speculation switched on (the adapter itself passed, for its flags and kind; the
    # baseline is checked plain before), the launch command, the load-dependent form
    candidate: Callable[[EngineAdapter, Sequence[str], SpeculationConfig], list[str]] = no_candidate
    # the files its candidate command names, path -> text, written before the candidate is launched (TensorRT-LLM
    # reads speculation only from an options file); the command itself stays a pure derivation
    candidate_files: Callable[[Sequence[str], SpeculationConfig], Mapping[str, str]] = no_files
    # speculation flags a plain baseline may carry, whose value the candidate merges speculation into (TensorRT-LLM's
    # options file): not refused as speculating; the `candidate` hook refuses a value that already speculates
    merged_flags: frozenset[str] = frozenset()
    launch: Callable[[str, int, int | None], list[str] | None] = no_launch
    load_form: Callable[[ByLoad], tuple[SpeculationConfig, str, tuple[str, ...]] | None] = no_load_form
    # one response's own fields -> its speculation counts and what its record keeps (None: none of this engine's
    # fields); called for every response through `adapters.response_reader`, the one reader the client is handed
    read_response: Callable[[EngineFields], ResponseReading | None] = no_response_fields
    # a window's acceptance from what its records kept, for an engine whose per-response counts cannot simply be
    # summed (llama.cpp's timings: tokens, no steps); None: nothing of the engine's in them
    window_acceptance: Callable[[Sequence[RequestRecord], int | None], AcceptanceSummary | None] = no_window_acceptance
    # Forced acceptance (drafts accepted by a draw to set rates, not verified: a cost probe): what in a launch command
    # and its environment says so, in the engine's own words (() : nothing), and the gauge that is 1 while the
    # engine runs that way (None: it has none). A response that says so carries `"forced": true` in its
    # speculation (`read_response`).
    forced_launch: Callable[[Sequence[str], Mapping[str, str]], tuple[str, ...]] = no_forced_launch
    forced_gauge: str | None = None
    # and the knob itself: the speculation with the engine's forced acceptance set to these unconditional
    # per-position rates (vLLM's `synthetic_acceptance_rates` semantics; `speculab predict`'s cost probes); None:
    # the engine has no knob speculab can set through a speculation config (its cost is probed at real acceptance)
    force_acceptance: Callable[[SpeculationConfig, tuple[float, ...]], SpeculationConfig] | None = None
    # A lossy acceptance mode (drafts accepted that the target would not always have chosen: typical acceptance,
    # relaxed acceptance, a probability threshold): what in a launch command turns it on, in the engine's own words
    # (() : nothing). Such a candidate's outputs are not expected to equal the baseline's: it is judged by its checks
    # only (verdict.correctness).
    lossy_launch: Callable[[Sequence[str]], tuple[str, ...]] = no_lossy_launch

    def candidate_command(self, baseline_cmd: Sequence[str], speculation: SpeculationConfig) -> list[str]:
        """The baseline command with speculation switched on and nothing else changed; a baseline that already
        speculates is refused first, for every engine (its plain values, TGI's `--speculate 0`, are plain)."""
        refuse_if_speculating(self, baseline_cmd)
        return self.candidate(self, baseline_cmd, speculation)

    def launch_command(self, model: str, port: int, context: int | None) -> list[str] | None:
        """`speculab init`'s guess at the command that serves `model` on `port` (with its context said when known);
        None: speculab cannot guess one."""
        return self.launch(model, port, context)

    def by_load(self, b: ByLoad) -> tuple[SpeculationConfig, str, tuple[str, ...]] | None:
        """The recommendation as one speculation this engine changes with the load (its form, notes); None: the
        engine has no load-dependent form for it."""
        return self.load_form(b)


# --- what adapters share to read a response's own fields ------------------------------------------------------------


def checked_scalars(fields: Mapping[str, Any]) -> dict[str, Any]:
    """An engine's per-response scalars as later sums read them: a field named like a count (`*_n`, `*_ct`,
    `*_tokens`, ...) that is not one is dropped, and so is every non-finite or oversized number and every nested
    value, so acceptance and prefix-cache sums never meet a string, a NaN or 1e308. What was dropped is listed
    under `"dropped"`, so a record says the server sent something it could not use."""
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for key, v in fields.items():
        if _is_count_name(str(key)):
            if as_count(v) is not None:
                kept[key] = as_count(v)
            else:
                dropped.append(str(key)[:80])
        elif (isinstance(v, str) and len(v) <= 200) or _finite_number(v):
            kept[key] = v
        else:
            dropped.append(str(key)[:80])
    if dropped:
        kept["dropped"] = dropped
    return kept


def _is_count_name(key: str) -> bool:
    return key.endswith(("_n", "_ct", "_tokens", "_accepted", "_num", "_drafts")) or "draft_n" in key


def _finite_number(v: Any) -> bool:
    if isinstance(v, bool):
        return True
    if isinstance(v, int):
        return abs(v) <= 2**53
    return isinstance(v, float) and math.isfinite(v) and abs(v) <= 1e15


def json_flag(command: Sequence[str], flag: str) -> dict[str, Any]:
    """The keys a JSON-valued flag sets, merged in order: `FLAG JSON`, `FLAG=JSON`, and vLLM's dotted form
    `FLAG.key VALUE` (`FLAG.key=VALUE`); a value that is not a JSON object is no keys (the engine refuses it)."""
    out: dict[str, Any] = {}
    for i, word in enumerate(command):
        name, eq, value = word.partition("=")
        if not eq:
            value = command[i + 1] if i + 1 < len(command) else ""
        if name == flag:
            try:
                given = json.loads(value)
            except ValueError:
                continue
            out.update(given if isinstance(given, dict) else {})
        elif name.startswith(flag + "."):
            try:
                out[name[len(flag) + 1 :]] = json.loads(value)
            except ValueError:
                out[name[len(flag) + 1 :]] = value
    return out


def object_at(fields: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    """fields[key] when it is a JSON object (an engine's extension field, as the wire layer kept it), else None."""
    v = fields.get(key)
    return v if isinstance(v, Mapping) else None


def diff_for(adapter: EngineAdapter, baseline_cmd: Sequence[str], candidate_cmd: Sequence[str]) -> CommandDiff:
    """command_diff with the adapter's flag aliases, so `-md x` and `--model-draft x` are the same flag."""
    return command_diff(baseline_cmd, candidate_cmd, adapter.aliases)


def is_single_change(diff: CommandDiff, adapter: EngineAdapter) -> bool:
    """True when the commands differ, and only in the adapter's speculation flags."""
    if not diff.differences:
        return False
    return all(
        is_speculation_flag(d.flag, adapter.speculation_flags, adapter.speculation_prefixes) for d in diff.differences
    )


def refuse_if_speculating(adapter: EngineAdapter, baseline_cmd: Sequence[str]) -> None:
    """A baseline that already speculates cannot be the plain arm: say which flag to remove."""
    parsed = parse_command(baseline_cmd, adapter.aliases)
    # a speculation flag whose value switches speculation off (TGI's `--speculate 0`) is plain decoding
    plain = adapter.plain_values
    for flag, values in parsed.flags.items():
        if (flag in plain and values == (plain[flag],)) or flag in adapter.merged_flags:
            continue
        if is_speculation_flag(flag, adapter.speculation_flags, adapter.speculation_prefixes):
            raise UserError(
                f"baseline.launch.command already has speculation flag {flag}; remove it (the baseline must be "
                "plain decoding, speculab adds speculation for the candidate)"
            )


def unsupported(kind: str, speculation: SpeculationConfig, supported: str) -> UserError:
    return UserError(
        f"engine {kind} cannot run speculation method {speculation.method} through speculab ({supported} supported); "
        "give candidate.command explicitly, or choose another method"
    )


def plain_base(adapter: EngineAdapter) -> list[str]:
    """The words of a plain baseline that speculation replaces (TGI's `--speculate 0`); [] for most engines."""
    return [w for flag, value in adapter.plain_values.items() for w in (flag, value)]


# --- what a server behind a URL says it runs (`says_config`): its speculation and arguments ------------------------


@dataclass(frozen=True, slots=True)
class Served:
    """What a server said it runs: its speculative config in vLLM keys (None: plain decoding) and its arguments as
    the command-line flags they are, for `diff_for` (where it listens and secrets are not said)."""

    speculation: Mapping[str, Any] | None
    command: tuple[str, ...]

    @property
    def method(self) -> str | None:
        return str(self.speculation["method"]) if self.speculation else None

    @property
    def k(self) -> int | None:
        k = self.speculation.get("num_speculative_tokens") if self.speculation else None
        return k if isinstance(k, int) and not isinstance(k, bool) else None


def served(adapter: EngineAdapter, version: Any) -> Served | None:
    """What the server says it runs, from its /version body, for an engine that says it (`says_config`); None when
    it says nothing usable (another engine, an older release, a body not of that shape): unknown, never "plain"."""
    if not adapter.says_config or not isinstance(version, Mapping):
        return None
    spec, args = version.get("speculative_config", False), version.get("server_args")
    if not isinstance(args, Mapping) or not (spec is None or (isinstance(spec, Mapping) and "method" in spec)):
        return None
    words: list[str] = []
    for key, value in sorted(args.items()):
        if value is None or value is False:
            continue  # a flag not given
        words.append("--" + str(key).replace("_", "-"))
        if value is not True:
            words.append(json.dumps(value, sort_keys=True) if isinstance(value, (Mapping, list)) else str(value))
    return Served(spec, tuple(words))


def served_change(adapter: EngineAdapter, baseline: Served, candidate: Served) -> tuple[CommandDiff, bool]:
    """The single-change rule over what two servers said they run: their differences, and whether they are in
    speculation only (the rule launch mode applies to the commands it runs, `is_single_change`)."""
    diff = diff_for(adapter, baseline.command, candidate.command)
    return diff, is_single_change(diff, adapter)


def said(server_info: Mapping[str, Any], adapter_of: Callable[[str], EngineAdapter]) -> Served | None:
    """What a server said it runs, from what a run recorded of it (`{"version": /version body, "detected_engine":
    kind}`: a bench manifest's `server`, an arm's `server_info`); None: it said nothing usable."""
    return served(adapter_of(str(server_info.get("detected_engine") or "other")), server_info.get("version"))


def said_change(
    baseline: Mapping[str, Any], candidate: Mapping[str, Any], adapter_of: Callable[[str], EngineAdapter]
) -> tuple[CommandDiff, bool] | None:
    """`served_change` over two recorded servers of one engine that both said what they run; None: unverifiable."""
    sa, sb = said(baseline, adapter_of), said(candidate, adapter_of)
    engine = baseline.get("detected_engine")
    if sa is None or sb is None or engine != candidate.get("detected_engine"):
        return None
    return served_change(adapter_of(str(engine)), sa, sb)
