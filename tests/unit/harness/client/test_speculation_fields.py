"""Per-response speculation stats from each engine's own fields, in one shape; nothing made up when absent."""

import json

from speculab.harness.client.speculation_fields import kept_meta_info, speculation_from_response
from speculab.protocol.chunks import parse_body


def test_sglang_meta_info_on_a_non_streamed_chat_choice():
    # SGLang /v1/chat/completions with return_meta_info: choices[0].meta_info (entrypoints/openai/protocol.py)
    body = {
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hi"},
                "finish_reason": "stop",
                "meta_info": {
                    "spec_verify_ct": 5,
                    "spec_num_correct_drafts": 7,
                    "spec_num_proposed_drafts": 15,
                    "spec_accept_length": 2.4,
                    "completion_tokens": 12,
                    "cached_tokens": 64,
                    "output_token_logprobs": [[-0.1, 7, None]] * 12,
                },
            }
        ],
        "usage": {"prompt_tokens": 80, "completion_tokens": 12, "total_tokens": 92},
    }
    d = parse_body(json.dumps(body), "chat")
    spec = speculation_from_response(d.usage, d.timings, d.metrics, d.meta_info)
    assert spec == {"drafts": 5, "draft_tokens": 15, "accepted_tokens": 7, "source": "sglang meta_info"}
    kept = kept_meta_info(d.meta_info)
    assert kept == {"spec_verify_ct": 5, "spec_num_correct_drafts": 7, "spec_num_proposed_drafts": 15,
                    "completion_tokens": 12, "cached_tokens": 64}  # fmt: skip


def test_older_sglang_names_and_what_is_not_reported_stays_none():
    old = {"spec_verify_ct": 3, "spec_accept_token_num": 4, "spec_draft_token_num": 9}
    assert speculation_from_response(None, meta_info=old) == {
        "drafts": 3, "draft_tokens": 9, "accepted_tokens": 4, "source": "sglang meta_info"
    }  # fmt: skip
    # only the step count (SGLang without the newer counters): the token counts are not derived
    assert speculation_from_response(None, meta_info={"spec_verify_ct": 3, "completion_tokens": 9}) == {
        "drafts": 3, "draft_tokens": None, "accepted_tokens": None, "source": "sglang meta_info"
    }  # fmt: skip
    assert speculation_from_response(None, meta_info={"completion_tokens": 9}) is None  # no speculation reported
    assert (
        speculation_from_response({"prompt_tokens": 1}, {"prompt_n": 3}, {"time_to_first_token_ms": 1.0}, None) is None
    )
