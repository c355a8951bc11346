"""speculab diagnose's findings in words (title, whom it affects, the evidence, the next step, by `FindingKind`), its
queueing check's account of the extra TTFT at load and its disaggregation suggestion, made from their numbers when
rendering (a /1 diagnosis.json's saved sentences render as they were)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from speculab.harness.results.warnings import FindingKind
from speculab.harness.verdict.model import TPOT

Fields = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class FindingWords:
    """What a finding says: its title, whom it affects, the evidence and the next step."""

    title: str
    affects: str
    evidence: str
    next_step: str


NEXT_DECODE = (
    "evaluate speculative decoding on this workload: write an experiment with `speculab init --url URL` and run "
    "`speculab run experiment.yaml` (it shortens exactly this part)"
)
NEXT_COLD = (
    "keep the server warm (at least one replica always up; a keep-alive request more often than the idle timeout) "
    "or make it load faster (weights on local disk, cached compilation / CUDA graphs, a smaller image)"
)
NEXT_QUEUE = (
    "add capacity (more replicas, or a larger batch / --max-num-seqs if memory allows) or change scheduling "
    "(admission limits, priorities) so requests do not wait for a slot"
)
_QUEUEING_UNMEASURED = {
    "no_load": "pass --concurrency N (your operating point) to measure queueing",
    "incomplete": "the workload did not complete at both concurrency 1 and the operating point",
}


def _x(ratio: float | None, digits: int) -> str:
    """A ratio of two means; a file's JSON holds null where it was not finite."""
    return f"{ratio:.{digits}f}" if ratio is not None else "nan"


def queueing_note(q: Fields) -> str:
    """The queueing check in words: what load added to TTFT and what it was weighed against (or why unmeasured)."""
    if "note" in q:  # diagnosis.json /1 saved the sentence
        return str(q["note"])
    if not q.get("measured"):
        return _QUEUEING_UNMEASURED[q["unmeasured"]]
    parts = []
    if q.get("server_queue_s") is not None:
        parts.append(f"the server reports {q['server_queue_s']:.3f} s of queue time per request")
    if q.get("prefill_bound_s") is not None:
        within = "within" if q.get("within_prefill") else "more than"
        parts.append(
            f"{within} the prefill work of the other {q['others_in_flight']:.3g} requests in flight "
            f"({q['prefill_bound_s']:.3f} s)"
        )
    else:
        parts.append("no prefill fit to compare the extra TTFT with")
    return (
        f"TTFT {q['ttft_c1_s']:.3f} s alone -> {q['ttft_load_s']:.3f} s at {q['at']} ({_x(q.get('ttft_ratio'), 1)}x); "
        f"TPOT {q['tpot_c1_s'] * 1e3:.1f} -> {q['tpot_load_s'] * 1e3:.1f} ms ({_x(q.get('tpot_ratio'), 2)}x); "
        + "; ".join(parts)
    )


def disaggregation_text(doc: Fields) -> str | None:
    """The disaggregation suggestion and its cost, only when prefill/decode interference was measured."""
    suggested = doc.get("disaggregation")
    if isinstance(suggested, str) or not suggested:  # /1 saved the sentence; /2 says whether to suggest it
        return suggested or None
    return (
        f"prefill and decode interfere under load ({queueing_note(doc.get('queueing') or {})}): prefill/decode "
        "disaggregation (separate prefill and decode servers) would keep long prefills from delaying first tokens. "
        "Its cost: the KV cache of every prompt is transferred from the prefill to the decode server (network "
        "bandwidth and latency per request) and a router must pair them; try chunked prefill first, which needs "
        "neither"
    )


def _decode_words(f: Fields) -> FindingWords:
    over = f" over {f['output_tokens']:.0f} output tokens" if f.get("output_tokens") else ""
    return FindingWords(
        "generation after the first token",
        f"every request (at {f['at']})",
        f"E2E {f['e2e_s']:.3f} s of which {f['decode_s']:.3f} s ({f['decode_share']:.0%}) after the first token; TPOT "
        f"{f[TPOT.name] * 1e3:.1f} ms{over}",
        NEXT_DECODE,
    )


def _prefill_next(prefix_caching: bool | None) -> str:
    if prefix_caching is True:
        cache = "prefix caching is already on (measured), so reuse shared prompt prefixes more (same system prompt"
        cache += " and documents first, in the same order)"
    elif prefix_caching is False:
        cache = "turn on prefix caching if your prompts share prefixes (it is off here: a repeated prefix was not"
        cache += " faster)"
    else:
        cache = "turn on prefix caching if your prompts share prefixes"
    return f"{cache}; use chunked prefill / prefill scheduling so long prompts do not stall others; shorten prompts"


def _prefill_words(f: Fields) -> FindingWords:
    return FindingWords(
        "long prompts (prefill)",
        "every request, in proportion to its prompt length",
        f"TTFT = {f['overhead_s']:.3f} s + {f['s_per_token'] * 1e3:.3f} ms x prompt tokens (prefill "
        f"{f['tokens_per_s']:,.0f} tokens/s, R² {f['r2']:.2f}); the workload's {f['prompt_tokens']:.0f}-token prompts "
        f"cost {f['prefill_s']:.3f} s of prefill",
        _prefill_next(f.get("prefix_caching")),
    )


def _queueing_words(f: Fields) -> FindingWords:
    client = f"; client-side wait {f['client_queue_s']:.3f} s" if f.get("client_queue_s") else ""
    return FindingWords(
        f"queueing at {f['at']}",
        f"requests at the operating point ({f['at']})",
        queueing_note(f) + client,
        NEXT_QUEUE,
    )


def _cold_start_words(f: Fields) -> FindingWords:
    if f.get("mode") == "launch":
        affects = "the first request after the server (re)starts: scale-from-zero, restarts, deploys"
        evidence = (
            f"process start -> ready (/health) {f.get('process_ready_s') or math.nan:.2f} s -> first token "
            f"{f.get('process_first_token_s') or math.nan:.2f} s"
        )
    else:
        idle = f.get("idle_s")
        affects = "the first request after start" + (f" or after {idle:g} s idle" if idle else "")
        warm = f.get("warm_ttft_s")
        parts = [f"warm TTFT {warm:.3f} s" if warm is not None else "no warm TTFT"]
        if f.get("first_request_ttft_s") is not None:
            parts.append(f"first request {f['first_request_ttft_s']:.3f} s")
        if f.get("after_idle_ttft_s") is not None:
            parts.append(f"after {idle:g} s idle {f['after_idle_ttft_s']:.3f} s")
        evidence = "; ".join(parts)
    return FindingWords("cold start", affects, evidence, NEXT_COLD)


FINDING_WORDS: dict[FindingKind, Callable[[Fields], FindingWords]] = {
    FindingKind.DECODE: _decode_words,
    FindingKind.PREFILL: _prefill_words,
    FindingKind.QUEUEING: _queueing_words,
    FindingKind.COLD_START: _cold_start_words,
}


def finding_words(finding: Fields) -> FindingWords:
    """A finding of diagnosis.json in words: made from its kind and fields (/2), or the sentences a /1 file saved."""
    if "fields" not in finding:
        return FindingWords(
            str(finding.get("title", "")),
            str(finding.get("affects", "")),
            str(finding.get("evidence", "")),
            str(finding.get("next_step", "")),
        )
    return FINDING_WORDS[FindingKind(finding["cause"])](finding["fields"])
