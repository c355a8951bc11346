"""The mock server's wire format: streamed chunks (SSE), whole bodies and error events, as vLLM writes them."""

from __future__ import annotations

import json
from typing import Any

from speculab.mock.requests import Job

# --------------------------------------------------------------------------------------------------------------
# Wire format of chunks and bodies


def logprobs_block(job: Job, lps: list[dict[str, Any]], text_offset: int) -> dict[str, Any]:
    if job.chat:
        return {
            "content": [
                {
                    "token": e["token"],
                    "logprob": e["logprob"],
                    "bytes": list(e["token"].encode()),
                    "top_logprobs": [
                        {"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in e["top"].items()
                    ],
                }
                for e in lps
            ]
        }
    offsets, off = [], text_offset
    for e in lps:
        offsets.append(off)
        off += len(e["token"])
    return {
        "tokens": [e["token"] for e in lps],
        "token_logprobs": [e["logprob"] for e in lps],
        "top_logprobs": [e["top"] for e in lps] if job.logprobs_top else None,
        "text_offset": offsets,
    }


def choice(job: Job, text: str | None, finish: str | None, logprobs: dict[str, Any] | None) -> dict[str, Any]:
    if job.chat:
        delta: dict[str, Any] = {"role": "assistant", "content": ""} if text is None else {"content": text}
        return {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
    return {"index": 0, "text": text or "", "logprobs": logprobs, "finish_reason": finish}


def spec_decode_metrics(steps: list[int], k: int) -> dict[str, Any]:
    """vLLM's per-request `metrics` for a response made by verification steps of `steps` tokens each (accepted + 1
    bonus), k drafted per step: `speculative_decoding` {num_spec_steps, num_draft_tokens, num_accepted_draft_tokens,
    acceptance_histogram (steps by accepted drafts 0..k), mean_acceptance_length, draft_acceptance_rate,
    num_spec_tokens}, as vLLM's --per-request-spec-decode-metrics summary writes it."""
    hist = [0] * (k + 1)
    for n in steps:
        hist[min(max(n - 1, 0), k)] += 1
    accepted = sum(j * c for j, c in enumerate(hist))
    n_steps = len(steps)
    return {
        "speculative_decoding": {
            "num_spec_steps": n_steps,
            "num_draft_tokens": n_steps * k,
            "num_accepted_draft_tokens": accepted,
            "acceptance_histogram": hist,
            "mean_acceptance_length": 1 + accepted / n_steps if n_steps else 0.0,
            "draft_acceptance_rate": accepted / (n_steps * k) if n_steps else 0.0,
            "num_spec_tokens": k,
        }
    }


def chunk_event(
    job: Job, choices: list[dict[str, Any]], usage: dict[str, Any] | None, metrics: dict[str, Any] | None = None
) -> bytes:
    obj: dict[str, Any] = {
        "id": job.rid,
        "object": "chat.completion.chunk" if job.chat else "text_completion",
        "created": job.created,
        "model": job.model,
        "choices": choices,
    }
    if job.include_usage:
        obj["usage"] = usage  # OpenAI: null on every chunk but the usage chunk, unless continuous
    if metrics is not None:
        obj["metrics"] = metrics
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def full_body(job: Job, text: str, lps: list[dict[str, Any]] | None) -> dict[str, Any]:
    logprobs = logprobs_block(job, lps, 0) if lps is not None else None
    if job.chat:
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": logprobs,
            "finish_reason": job.finish_reason,
        }
    else:
        choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": job.finish_reason}
    return {
        "id": job.rid,
        "object": "chat.completion" if job.chat else "text_completion",
        "created": job.created,
        "model": job.model,
        "choices": [choice],
        "usage": job.usage(job.n_tokens),
    }


def error_event(message: str) -> bytes:
    err = {"error": {"message": message, "type": "server_error", "param": None, "code": "mock_fault"}}
    return b"data: " + json.dumps(err).encode() + b"\n\n"
