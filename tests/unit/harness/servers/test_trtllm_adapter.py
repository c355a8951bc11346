"""TensorRT-LLM as one adapter record (#48 item 2): its launch command, its speculation as the `speculative_config` of
an options file speculab writes, and its per-choice acceptance read from a response shaped as its documentation
shows (tests/unit/harness/client/fixtures/trtllm_speculative_decoding.json says where from)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from speculab.commands.run.plan import derive_candidate
from speculab.config import SpeculationConfig
from speculab.errors import UserError
from speculab.harness.client.response import build_record
from speculab.harness.client.stream import StreamState
from speculab.harness.records import RequestSpec
from speculab.harness.servers.acceptance import acceptance_between
from speculab.harness.servers.adapters import adapter_for, detect_engine, diff_for, is_single_change, response_reader
from speculab.harness.servers.adapters.trtllm import OPTIONS_FLAG, options_yaml
from speculab.harness.servers.process import ServerCommand
from speculab.protocol.chunks import parse_body

FIXTURE = json.loads(
    (Path(__file__).parents[1] / "client" / "fixtures" / "trtllm_speculative_decoding.json").read_text()
)
SPEC = RequestSpec(index=0, prompt="p")
TRT = adapter_for("trtllm")
READ = response_reader("trtllm")
BASE = ["trtllm-serve", "/models/llama", "--host", "127.0.0.1", "--port", "8000"]


def _options(cmd: list[str]) -> dict:
    return yaml.safe_load(options_yaml_of(cmd))


def options_yaml_of(cmd: list[str]) -> str:
    return Path(cmd[cmd.index(OPTIONS_FLAG) + 1]).read_text()


def test_its_launch_command_is_trtllm_serve_with_host_and_port() -> None:
    assert TRT.launch_command("/models/llama", 8000, None) == BASE
    assert TRT.launch_command("/m", 9, 4096)[-2:] == ["--max_seq_len", "4096"]
    assert detect_engine(None, None, ["trtllm_e2e_request_latency_seconds_count"]) == "trtllm"


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (SpeculationConfig("ngram", 4, prompt_lookup_max=3), {"decoding_type": "NGram", "max_draft_len": 4,
                                                              "max_matching_ngram_size": 3}),
        (SpeculationConfig("draft_model", 3, model="/d"), {"decoding_type": "DraftTarget", "max_draft_len": 3,
                                                            "speculative_model_dir": "/d"}),
        (SpeculationConfig("eagle3", 3, model="/h", options={"eagle3_one_model": True}),
         {"decoding_type": "Eagle", "max_draft_len": 3, "speculative_model_dir": "/h", "eagle3_one_model": True}),
        (SpeculationConfig("mtp", 1), {"decoding_type": "MTP", "num_nextn_predict_layers": 1}),
    ],
)  # fmt: skip
def test_the_candidate_is_the_baseline_plus_an_options_file_of_speculative_config(spec, expected) -> None:
    cmd = TRT.candidate_command(BASE, spec)
    assert cmd[: len(BASE)] == BASE and cmd[len(BASE)] == OPTIONS_FLAG
    assert yaml.safe_load(options_yaml(spec)) == {"speculative_config": expected}
    diff = diff_for(TRT, BASE, cmd)
    assert is_single_change(diff, TRT)  # the options file is its one speculation flag


def test_planning_writes_the_file_the_candidate_names() -> None:
    spec = SpeculationConfig("ngram", 2)
    cand, change = derive_candidate(TRT, ServerCommand(tuple(BASE), 8000), spec, name="ngram-k2")
    assert change.verified is True
    assert _options(list(cand.command)) == {"speculative_config": {"decoding_type": "NGram", "max_draft_len": 2}}


def test_user_mistakes_are_one_line_naming_the_fix() -> None:
    with pytest.raises(UserError, match="needs `model`"):
        TRT.candidate_command(BASE, SpeculationConfig("draft_model", 3))
    with pytest.raises(UserError, match="remove it from options"):
        TRT.candidate_command(BASE, SpeculationConfig("ngram", 3, options={"max_draft_len": 5}))
    with pytest.raises(UserError, match=f"cannot read mine.yaml \\({OPTIONS_FLAG} of baseline.launch.command\\)"):
        TRT.candidate_command([*BASE, OPTIONS_FLAG, "mine.yaml"], SpeculationConfig("ngram", 3))


def test_a_baselines_own_options_file_is_merged_into_the_candidates(tmp_path) -> None:
    """trtllm-serve reads one options file: the candidate's holds the baseline's keys and speculative_config."""
    mine = tmp_path / "mine.yaml"
    mine.write_text("kv_cache_config: {free_gpu_memory_fraction: 0.8}\nmax_batch_size: 64\n")
    base = [*BASE, f"{OPTIONS_FLAG}={mine}"]
    spec = SpeculationConfig("ngram", 2)
    cand, change = derive_candidate(TRT, ServerCommand(tuple(base), 8000), spec, name="ngram-k2")
    assert list(cand.command).count(OPTIONS_FLAG) == 1 and str(mine) not in " ".join(cand.command)
    assert _options(list(cand.command)) == {
        "kv_cache_config": {"free_gpu_memory_fraction": 0.8},
        "max_batch_size": 64,
        "speculative_config": {"decoding_type": "NGram", "max_draft_len": 2},
    }
    assert change.verified is True  # the options file is the one thing that differs
    mine.write_text("speculative_config: {decoding_type: NGram, max_draft_len: 4}\n")
    with pytest.raises(UserError, match=f"{mine} already has speculative_config; remove it"):
        TRT.candidate_command([*BASE, OPTIONS_FLAG, str(mine)], spec)
    mine.write_text("- a list\n")
    with pytest.raises(UserError, match="is not a mapping of LLM API options"):
        TRT.candidate_command([*BASE, OPTIONS_FLAG, str(mine)], spec)


EXPECTED = {
    "drafts": 20,
    "draft_tokens": 60,
    "accepted_tokens": 30,
    "accepted_per_position": [12, 12, 6],  # steps with more than p accepted drafts, from [8, 0, 6, 6]
    "source": "trtllm choices[].speculative_decoding",
}


def test_a_bodys_per_choice_acceptance_is_read() -> None:
    d = parse_body(json.dumps(FIXTURE["body"]), "chat")
    rec = build_record(SPEC, d, scheduled_s=0.9, sent_s=1.0, end_s=1.2, warmup=False, stream=False, error=None,
                       logprobs=None, read=READ)  # fmt: skip
    assert rec.speculation == EXPECTED
    assert rec.extra["choice"]["avg_decoded_tokens_per_iter"] == 2.5  # its acceptance length, kept as it said it


def test_a_streams_per_choice_acceptance_is_read_from_its_finish_chunk() -> None:
    st = StreamState("chat", read=READ)
    for i, ev in enumerate([*FIXTURE["stream"], "[DONE]"]):
        st.feed(f"data: {ev if isinstance(ev, str) else json.dumps(ev)}\n\n".encode(), 1.0 + i / 100)
    rec = st.record(spec=SPEC, scheduled_s=0.9, sent_s=1.0, end_s=1.1)
    assert rec.error is None and rec.output_text == "one two three four"
    assert rec.speculation == EXPECTED


def test_its_acceptance_over_a_window_is_the_responses_summed() -> None:
    d = parse_body(json.dumps(FIXTURE["body"]), "chat")
    recs = [
        build_record(
            SPEC,
            d,
            scheduled_s=0.9,
            sent_s=1.0,
            end_s=1.2,
            warmup=w,
            stream=False,
            error=None,
            logprobs=None,
            read=READ,
        )
        for w in (True, False, False)
    ]
    found = acceptance_between(TRT, None, None, recs)
    assert found is not None and found.active and found.source.startswith("trtllm choices[].speculative_decoding")
    assert (found.drafts, found.draft_tokens, found.accepted_tokens) == (40, 120, 60)  # the warmup left out
    assert found.acceptance_rate == pytest.approx(0.5) and found.acceptance_length == pytest.approx(2.5)
    assert found.per_position == pytest.approx((0.6, 0.6, 0.3))


def test_an_engine_field_is_kept_bounded() -> None:
    body = json.loads(json.dumps(FIXTURE["body"]))
    body["choices"][0]["speculative_decoding"]["junk"] = "x" * 20_000  # past the wire layer's bound: dropped
    d = parse_body(json.dumps(body), "chat")
    sd = d.choice_extras["speculative_decoding"]
    assert "junk" not in sd and sd == FIXTURE["body"]["choices"][0]["speculative_decoding"]  # its counts survive it
    assert build_record(SPEC, d, scheduled_s=0.9, sent_s=1.0, end_s=1.2, warmup=False, stream=False, error=None,
                        logprobs=None, read=READ).speculation == EXPECTED  # fmt: skip
    body["choices"][0]["speculative_decoding"] = {"deep": {"deeper": {"junk": "x" * 20_000}}}
    assert parse_body(json.dumps(body), "chat").choice_extras == {"avg_decoded_tokens_per_iter": 2.5}
