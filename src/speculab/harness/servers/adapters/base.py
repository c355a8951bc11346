"""The adapter interface every engine implements, and what adapters share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from speculab.config import SpeculationConfig
from speculab.errors import UserError
from speculab.harness.servers.adapters.flags import CommandDiff, command_diff, is_speculation_flag, parse_command


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
    response_fields: Mapping[str, str] = field(default_factory=dict)  # meaning -> dotted path in the response


@dataclass(frozen=True, slots=True)
class PrefixCacheMetrics:
    """Where an engine counts prefix-cache lookups, in prompt tokens (Prometheus counters, diffed around a level).

    hits: tokens found in the cache. queries: tokens looked up; or, for engines that count the rest instead,
    misses: tokens computed (queries = hits + misses)."""

    hits: str
    queries: str | None = None
    misses: str | None = None


class EngineAdapter(Protocol):
    """What speculab needs to know about one engine kind."""

    kind: str
    health_path: str
    acceptance: AcceptanceMetrics
    prefix_cache: PrefixCacheMetrics | None  # None: the engine exposes no prefix-cache counters
    keep_alive: bool  # False: the server drops keep-alive connections after streamed responses (send Connection: close)
    speculation_flags: frozenset[str]  # exact flags that belong to speculation
    speculation_prefixes: tuple[str, ...]  # any flag starting with one of these belongs to speculation
    aliases: Mapping[str, str]  # alternate spellings -> canonical flag

    def candidate_command(self, baseline_cmd: Sequence[str], spec: SpeculationConfig) -> list[str]:
        """The baseline command with speculation switched on and nothing else changed."""
        ...


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
    plain: Mapping[str, str] = getattr(adapter, "plain_values", {})
    for flag, values in parsed.flags.items():
        if flag in plain and values == (plain[flag],):
            continue
        if is_speculation_flag(flag, adapter.speculation_flags, adapter.speculation_prefixes):
            raise UserError(
                f"baseline.launch.command already has speculation flag {flag}; remove it (the baseline must be "
                "plain decoding, speculab adds speculation for the candidate)"
            )


def unsupported(kind: str, spec: SpeculationConfig, supported: str) -> UserError:
    return UserError(
        f"engine {kind} cannot run speculation method {spec.method} through speculab ({supported} supported); "
        "give candidate.command explicitly, or choose another method"
    )
