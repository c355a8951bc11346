"""Forced acceptance, where each engine says it: in a launch command and its environment (vLLM's synthetic
rejection sampler, SGLang's SGLANG_SIMULATE_ACC_LEN, `speculab serve`'s and the mock's --forced-acceptance-rates), in
what a server says it runs, in the reference engine's gauge and in a response's speculation; an acceptance so seen
is "forced", never "measured"."""

from __future__ import annotations

import json

from speculab.harness.records import FORCED, MEASURED, AcceptanceSummary, RequestRecord
from speculab.harness.servers.acceptance import RESPONSES_FORCED, acceptance_with_reason
from speculab.harness.servers.adapters import adapter_for, forced_by_launch, forced_by_server, response_reader
from speculab.harness.servers.scrape import parse_metrics
from speculab.protocol.chunks import EngineFields

VLLM = ["vllm", "serve", "m", "--port", "8000"]


def test_vllm_synthetic_rejection_sampling_is_forced_in_each_spelling() -> None:
    config = {"method": "ngram", "num_speculative_tokens": 3, "rejection_sample_method": "synthetic"}
    rates = config | {"synthetic_acceptance_rates": [0.8, 0.6, 0.4]}
    (said,) = forced_by_launch([*VLLM, "--speculative-config", json.dumps(rates)], {})
    assert "rejection_sample_method=synthetic" in said and "[0.8, 0.6, 0.4]" in said
    assert forced_by_launch([*VLLM, f"--speculative-config={json.dumps(config)}"], {})
    assert forced_by_launch([*VLLM, "--speculative_config", json.dumps(config)], {})
    # vLLM's dotted form: --speculative-config.KEY VALUE
    dotted = [
        *VLLM,
        "--speculative-config.method",
        "ngram",
        "--speculative-config.rejection_sample_method",
        "synthetic",
    ]
    assert forced_by_launch(dotted, {})
    # rejection sampling as usual, or no speculation at all: nothing forced
    plain = {"method": "ngram", "num_speculative_tokens": 3}
    assert forced_by_launch([*VLLM, "--speculative-config", json.dumps(plain)], {}) == ()
    assert forced_by_launch([*VLLM, "--speculative-config", "{not json"], {}) == ()
    assert forced_by_launch(VLLM, {}) == ()


def test_sglang_simulated_acceptance_length_in_the_environment_or_an_env_word() -> None:
    cmd = ["python", "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE"]
    assert forced_by_launch(cmd, {"SGLANG_SIMULATE_ACC_LEN": "2.5"}) == ("SGLANG_SIMULATE_ACC_LEN=2.5",)
    assert forced_by_launch(["env", "SGLANG_SIMULATE_ACC_LEN=3", *cmd], {}) == ("SGLANG_SIMULATE_ACC_LEN=3",)
    # 0 or below switches it off (SGLang's own default); a value that is not a number starts no server
    assert forced_by_launch(cmd, {"SGLANG_SIMULATE_ACC_LEN": "0"}) == ()
    assert forced_by_launch(cmd, {"SGLANG_SIMULATE_ACC_LEN": "-1"}) == ()
    assert forced_by_launch(cmd, {"SGLANG_SIMULATE_ACC_LEN": "x"}) == ()
    assert forced_by_launch(cmd, {}) == ()


def test_the_reference_engine_and_the_mock_take_one_flag() -> None:
    serve = ["python", "-m", "speculab", "serve", "demo", "--forced-acceptance-rates", "0.8,0.6"]
    assert forced_by_launch(serve, {}) == ("--forced-acceptance-rates 0.8,0.6",)
    mock = ["speculab", "mock-server", "--port", "9000", "--forced-acceptance-rates=0.5"]
    assert forced_by_launch(mock, {}) == ("--forced-acceptance-rates 0.5",)
    assert forced_by_launch(["python", "-m", "speculab", "serve", "demo"], {}) == ()


def test_what_a_server_says_it_runs_forces_it_too() -> None:
    args = {"model": "demo", "forced_acceptance_rates": "0.8,0.6", "speculative_config": None}
    info = {"detected_engine": "speculab", "version": {"speculative_config": {"method": "ngram"}, "server_args": args}}
    assert forced_by_server(info) == ("--forced-acceptance-rates 0.8,0.6",)
    config = {"method": "ngram", "rejection_sample_method": "synthetic"}
    info = {"detected_engine": "speculab", "version": {"speculative_config": config, "server_args": {"model": "d"}}}
    assert forced_by_server(info)
    plain = {"detected_engine": "speculab", "version": {"speculative_config": None, "server_args": {"model": "d"}}}
    assert forced_by_server(plain) == ()
    assert forced_by_server({"detected_engine": "vllm", "version": {"version": "0.32"}}) == ()  # says nothing


def _counters(drafts: int, forced: int | None) -> str:
    text = (
        f"speculab:spec_decode_num_drafts_total {drafts}\nspeculab:spec_decode_num_draft_tokens_total {3 * drafts}\n"
        f"speculab:spec_decode_num_accepted_tokens_total {2 * drafts}\n"
    )
    if forced is not None:
        text += (
            f"# TYPE speculab:spec_decode_forced_acceptance gauge\nspeculab:spec_decode_forced_acceptance {forced}\n"
        )
    return text


def test_the_engines_gauge_makes_the_windows_acceptance_forced() -> None:
    engine = adapter_for("speculab")
    before = parse_metrics(_counters(0, 1))
    acc, _ = acceptance_with_reason(engine, before, parse_metrics(_counters(10, 1)), [], 3)
    assert acc is not None and acc.provenance == FORCED and acc.forced
    assert acc.forced_by == ("speculab:spec_decode_forced_acceptance = 1",)
    measured, _ = acceptance_with_reason(engine, before, parse_metrics(_counters(10, 0)), [], 3)
    assert measured is not None and measured.provenance == MEASURED and not measured.forced_by
    # behind an `other` engine (bench names none), the reference engine's gauge is read as a fallback engine's
    other, _ = acceptance_with_reason(adapter_for("other"), before, parse_metrics(_counters(10, 1)))
    assert other is not None and other.forced
    older, _ = acceptance_with_reason(engine, before, parse_metrics(_counters(10, None)), [], 3)  # no gauge at all
    assert older is not None and not older.forced


def test_a_response_that_says_forced_makes_it_forced() -> None:
    usage = {"speculab_spec_decode": {"drafts": 4, "draft_tokens": 12, "accepted_tokens": 8, "forced": True}}
    reading = response_reader("speculab")(EngineFields(top={}, usage=usage))
    assert reading.speculation is not None and reading.speculation["forced"] is True
    unforced = {"speculab_spec_decode": {"drafts": 4, "draft_tokens": 12, "accepted_tokens": 8}}
    assert "forced" not in (response_reader("speculab")(EngineFields(top={}, usage=unforced)).speculation or {})
    rec = RequestRecord(0, 0.0, 0.0, 1.0, completion_tokens=9, speculation=reading.speculation)
    snap = parse_metrics(_counters(0, None))
    acc, _ = acceptance_with_reason(adapter_for("speculab"), snap, parse_metrics(_counters(4, None)), [rec], 3)
    assert acc is not None and acc.forced and acc.forced_by == (RESPONSES_FORCED,)
    warm = RequestRecord(0, 0.0, 0.0, 1.0, warmup=True, speculation=reading.speculation)  # warmup says nothing
    acc, _ = acceptance_with_reason(adapter_for("speculab"), snap, parse_metrics(_counters(4, None)), [warm], 3)
    assert acc is not None and not acc.forced


def test_provenance_is_written_and_read_back_and_an_older_file_reads_as_measured() -> None:
    forced = AcceptanceSummary("s", True, 1, 3, 2, 2 / 3, 3.0, (0.8,), provenance=FORCED, forced_by=("g = 1",))
    assert AcceptanceSummary.from_dict(forced.to_dict()) == forced
    assert forced.to_spec_decode_dict()["provenance"] == FORCED
    assert AcceptanceSummary.from_spec_decode_dict(forced.to_spec_decode_dict()).forced  # type: ignore[union-attr]
    old = {k: v for k, v in forced.to_dict().items() if k not in ("provenance", "forced_by")}
    assert AcceptanceSummary.from_dict(old).provenance == MEASURED
