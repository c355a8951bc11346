"""Per-response speculative-decoding stats, read from each engine's own response fields into one shape.

`RequestRecord.speculation` is `{"drafts", "draft_tokens", "accepted_tokens", "source"}` (vLLM semantics: a draft is one
verification step of this request; accepted tokens exclude the target's own token), plus `accepted_per_position` where
the engine gives a per-step histogram. A value the engine did not report is None, never derived; no recognised field
at all gives None. The fields, by engine (docs/engines.md says which were seen from a real server):

* speculab: `usage.speculab_spec_decode` {drafts, draft_tokens, accepted_tokens} (every response with speculation).
* vLLM (`--per-request-spec-decode-metrics summary|detailed`, 0.32): top-level `metrics.speculative_decoding`
  {num_spec_steps, num_draft_tokens, num_accepted_draft_tokens, acceptance_histogram, ...} in the body, or in the
  final usage chunk of a stream (so only with `stream_options.include_usage`, which the harness always sends).
* SGLang: `meta_info` {spec_verify_ct, spec_num_correct_drafts | spec_accepted_drafts | spec_accept_token_num,
  spec_num_proposed_drafts | spec_proposed_drafts | spec_draft_token_num} on the choice (non-streamed chat with
  `return_meta_info: true`) or at the top level (native /generate).
* SGLang with `return_spec_tokens_details: true` in the request (its adapter's `request_fields`): `sglext.
  spec_tokens_details` {spec_verify_ct, spec_num_correct_drafts, spec_num_proposed_drafts, spec_accept_rate,
  spec_accept_length, histograms} at the body's top level, or streamed in a chunk of its own (`choices: []`) before
  the usage chunk (sglang/srt/entrypoints/openai/utils.py `spec_tokens_details_from_meta_info`, serving_chat.py).
  SGLang writes 0 for a count it lacks: drafts proposed 0 with some accepted is dropped by `_consistent`.
* llama.cpp: `timings.draft_n` / `timings.draft_n_accepted` (tokens; no step count per request).
* TensorRT-LLM: per choice, `speculative_decoding` {num_spec_steps, total_draft_tokens, total_accepted_draft_tokens,
  acceptance_histogram (steps by accepted drafts, as vLLM's), acceptance_rate, num_spec_tokens} when the server
  reports it (absent otherwise); the wire layer keeps choice 0's engine fields (`Delta.choice_extras`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from speculab.protocol.chunks import as_count

SOURCE_SPECULAB = "speculab usage.speculab_spec_decode"
SOURCE_VLLM = "vllm metrics.speculative_decoding"
SOURCE_SGLANG = "sglang meta_info"
SOURCE_SGLANG_EXT = "sglang sglext.spec_tokens_details"
SOURCE_LLAMACPP = "llama.cpp timings"
SOURCE_TRTLLM = "trtllm choices[].speculative_decoding"

# SGLang renamed these; every spelling seen in its tokenizer manager, newest first.
_SGLANG_ACCEPTED = ("spec_num_correct_drafts", "spec_accepted_drafts", "spec_accept_token_num")
_SGLANG_DRAFTED = ("spec_num_proposed_drafts", "spec_proposed_drafts", "spec_draft_token_num")
# meta_info scalars worth keeping in a record (it can also carry per-token logprobs: those are left out)
SGLANG_META_KEPT = ("spec_verify_ct", *_SGLANG_ACCEPTED, *_SGLANG_DRAFTED, "completion_tokens", "cached_tokens")


def speculation_from_response(
    usage: Mapping[str, Any] | None,
    timings: Mapping[str, Any] | None = None,
    metrics: Mapping[str, Any] | None = None,
    meta_info: Mapping[str, Any] | None = None,
    spec_details: Mapping[str, Any] | None = None,
    choice_extras: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The response's speculation stats from whichever engine field is present (they never coexist, but SGLang's
    two: its `sglext` details, asked for, before the `meta_info` a native response carries)."""
    found = (
        speculation_from_speculab_usage(usage)
        or speculation_from_vllm_metrics(metrics)
        or speculation_from_sglang_details(spec_details)
        or speculation_from_sglang_meta(meta_info)
        or speculation_from_timings(timings)
        or speculation_from_trtllm_choice(choice_extras)
    )
    return _consistent(found) if found is not None else None


def _consistent(spec: dict[str, Any]) -> dict[str, Any]:
    """More accepted than drafted tokens, or a position accepted more often than there were steps, is a buggy
    exporter: those counts are not reported (None), rather than an acceptance rate above 1."""
    accepted, drafted, steps = spec.get("accepted_tokens"), spec.get("draft_tokens"), spec.get("drafts")
    if accepted is not None and drafted is not None and accepted > drafted:
        spec = {**spec, "accepted_tokens": None, "draft_tokens": None}
    per_pos = spec.get("accepted_per_position")
    if per_pos is not None and steps is not None and any(p > steps for p in per_pos):
        spec = {k: v for k, v in spec.items() if k != "accepted_per_position"}
    return spec


def _int(v: Any) -> int | None:
    # a count the engine sent that is not one (negative, fractional, 1e308, a string) is "not reported"
    return as_count(v)


def _first(d: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    return next((_int(d[k]) for k in keys if _int(d.get(k)) is not None), None)


def speculation_from_speculab_usage(usage: Mapping[str, Any] | None) -> dict[str, Any] | None:
    ours = (usage or {}).get("speculab_spec_decode")
    if not isinstance(ours, Mapping):
        return None
    return {
        "drafts": _int(ours.get("drafts")),
        "draft_tokens": _int(ours.get("draft_tokens")),
        "accepted_tokens": _int(ours.get("accepted_tokens")),
        "source": SOURCE_SPECULAB,
    }


def speculation_from_vllm_metrics(metrics: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """vLLM's per-request `metrics.speculative_decoding`. Its histogram counts steps by accepted drafts j (0..k), so
    position p (0-based) was accepted in every step with j > p: that is vLLM's per-position counter, per request."""
    sd = (metrics or {}).get("speculative_decoding")
    if not isinstance(sd, Mapping):
        return None
    counts = (sd.get("num_spec_steps"), sd.get("num_draft_tokens"), sd.get("num_accepted_draft_tokens"))
    return _with_histogram(counts, sd.get("acceptance_histogram"), SOURCE_VLLM)


def speculation_from_trtllm_choice(choice: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """TensorRT-LLM's per-choice `speculative_decoding`: vLLM's counts under its own names, the same histogram."""
    sd = (choice or {}).get("speculative_decoding")
    if not isinstance(sd, Mapping):
        return None
    counts = (sd.get("num_spec_steps"), sd.get("total_draft_tokens"), sd.get("total_accepted_draft_tokens"))
    return _with_histogram(counts, sd.get("acceptance_histogram"), SOURCE_TRTLLM)


def _with_histogram(counts: tuple[Any, Any, Any], hist: Any, source: str) -> dict[str, Any]:
    """Steps, drafted and accepted tokens, and the per-position counts of a histogram of steps by accepted drafts j
    (0..k): position p (0-based) was accepted in every step with j > p, which is vLLM's per-position counter."""
    steps, drafted, accepted = counts
    out: dict[str, Any] = {
        "drafts": _int(steps),
        "draft_tokens": _int(drafted),
        "accepted_tokens": _int(accepted),
        "source": source,
    }
    if isinstance(hist, list) and len(hist) > 1 and all(_int(h) is not None for h in hist):
        out["accepted_per_position"] = [sum(int(h) for h in hist[p + 1 :]) for p in range(len(hist) - 1)]
    return out


def speculation_from_sglang_meta(meta_info: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not meta_info or _int(meta_info.get("spec_verify_ct")) is None:
        return None
    return {
        "drafts": _int(meta_info.get("spec_verify_ct")),
        "draft_tokens": _first(meta_info, _SGLANG_DRAFTED),
        "accepted_tokens": _first(meta_info, _SGLANG_ACCEPTED),
        "source": SOURCE_SGLANG,
    }


def speculation_from_sglang_details(details: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """SGLang's `sglext.spec_tokens_details`: verify steps, drafts proposed and correct (vLLM's semantics: tokens
    drafted and accepted); the server's own accept rate and length stay in the record's extra, as it said them."""
    if not details or _int(details.get("spec_verify_ct")) is None:
        return None
    return {
        "drafts": _int(details.get("spec_verify_ct")),
        "draft_tokens": _int(details.get("spec_num_proposed_drafts")),
        "accepted_tokens": _int(details.get("spec_num_correct_drafts")),
        "source": SOURCE_SGLANG_EXT,
    }


def speculation_from_timings(timings: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """llama.cpp adds draft_n / draft_n_accepted to `timings` only when the request drafted something; it reports
    no verification steps per request (its /metrics counter has them server-wide)."""
    if not timings or "draft_n" not in timings:
        return None
    return {
        "drafts": None,
        "draft_tokens": _int(timings.get("draft_n")),
        "accepted_tokens": _int(timings.get("draft_n_accepted")),
        "source": SOURCE_LLAMACPP,
    }


def kept_meta_info(meta_info: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """SGLang's meta_info scalars about speculation and the prefix cache, for the record (None when none)."""
    if not meta_info:
        return None
    kept = {k: meta_info[k] for k in SGLANG_META_KEPT if k in meta_info}
    return kept or None
