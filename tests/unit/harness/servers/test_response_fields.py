"""Per-response speculation stats from each engine's own fields, read by its adapter into one shape; nothing made up
when absent."""

import json
import pickle

import pytest

from speculab.harness.records import ResponseReading
from speculab.harness.servers.adapters import adapter_for, engine_kinds, response_reader
from speculab.protocol.chunks import EngineFields, parse_body

ANY = response_reader("other")  # a server of unknown kind: every engine's fields are read


def speculation(**top) -> dict | None:
    return ANY(EngineFields(None, top)).speculation


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
    reading = response_reader("sglang")(parse_body(json.dumps(body), "chat").engine_said)
    assert reading.speculation == {"drafts": 5, "draft_tokens": 15, "accepted_tokens": 7, "source": "sglang meta_info"}
    assert reading.kept["meta_info"] == {  # its scalars about speculation and the prefix cache; the logprobs left out
        "spec_verify_ct": 5, "spec_num_correct_drafts": 7, "spec_num_proposed_drafts": 15, "completion_tokens": 12,
        "cached_tokens": 64,
    }  # fmt: skip


def test_older_sglang_names_and_what_is_not_reported_stays_none():
    old = {"spec_verify_ct": 3, "spec_accept_token_num": 4, "spec_draft_token_num": 9}
    assert speculation(meta_info=old) == {
        "drafts": 3, "draft_tokens": 9, "accepted_tokens": 4, "source": "sglang meta_info"
    }  # fmt: skip
    # only the step count (SGLang without the newer counters): the token counts are not derived
    assert speculation(meta_info={"spec_verify_ct": 3, "completion_tokens": 9}) == {
        "drafts": 3, "draft_tokens": None, "accepted_tokens": None, "source": "sglang meta_info"
    }  # fmt: skip
    assert speculation(meta_info={"completion_tokens": 9}) is None  # no speculation reported
    said = EngineFields({"prompt_tokens": 1}, {"timings": {"prompt_n": 3}, "metrics": {"time_to_first_token_ms": 1.0}})
    reading = ANY(said)
    assert reading.speculation is None  # nothing drafted: no speculation, but what the engines said is kept
    assert reading.kept == {"timings": {"prompt_n": 3}, "metrics": {"time_to_first_token_ms": 1.0}}


def test_an_engines_own_reader_comes_first_and_every_other_engine_is_read_after_it():
    """Fields that name their engine are read whichever engine the run names (the client always read them all); where
    two engines' fields meet in one response, the run's engine is the one believed."""
    said = EngineFields(
        {"speculab_spec_decode": {"drafts": 1, "draft_tokens": 2, "accepted_tokens": 1}},
        {"timings": {"draft_n": 4, "draft_n_accepted": 3}},
    )
    assert response_reader("llamacpp")(said).speculation["source"] == "llama.cpp timings"
    assert response_reader("speculab")(said).speculation["source"] == "speculab usage.speculab_spec_decode"
    assert response_reader("tgi")(said).speculation["source"] == "speculab usage.speculab_spec_decode"  # registry order
    assert response_reader("tgi")(said).kept == {"timings": {"draft_n": 4, "draft_n_accepted": 3}}
    assert response_reader("no such engine")(said) == ANY(said)  # an unknown name reads as `other`


def test_the_reader_travels_to_a_worker_process():
    """Workers (spawned processes, Ray actors) get the endpoint pickled: its reader must survive that."""
    reader = pickle.loads(pickle.dumps(response_reader("vllm")))
    assert reader == response_reader("vllm")
    said = EngineFields(None, {"metrics": {"speculative_decoding": {"num_spec_steps": 2, "num_draft_tokens": 4}}})
    assert reader(said).speculation["drafts"] == 2


@pytest.mark.parametrize("kind", engine_kinds())
def test_an_engine_reads_nothing_from_a_response_without_its_fields(kind):
    plain = EngineFields({"prompt_tokens": 3, "completion_tokens": 2}, {}, {})
    assert adapter_for(kind).read_response(plain) is None
    assert response_reader(kind)(plain) == ResponseReading()


def test_the_reference_engines_per_position_counts_are_read_and_a_malformed_list_is_not():
    ours = {"drafts": 10, "draft_tokens": 40, "accepted_tokens": 12, "accepted_per_position": [7, 4, 1]}
    got = response_reader("speculab")(EngineFields({"speculab_spec_decode": ours}, {})).speculation
    assert got["accepted_per_position"] == [7, 4, 1]
    bad = ours | {"accepted_per_position": [7, "x", 1]}
    assert (
        "accepted_per_position"
        not in response_reader("speculab")(EngineFields({"speculab_spec_decode": bad}, {})).speculation
    )
