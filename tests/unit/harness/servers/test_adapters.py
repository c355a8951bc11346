"""Engine adapters: candidate commands, exact command diffs, the single-change rule, detection."""

from __future__ import annotations

import json

import pytest

from speculab.config import SpeculationConfig
from speculab.errors import UserError
from speculab.harness.servers.adapters import (
    adapter_for,
    command_diff,
    detect_engine,
    diff_for,
    is_single_change,
    parse_command,
)
from speculab.harness.servers.adapters.flags import POSITIONAL, redact_command

NGRAM = SpeculationConfig("ngram", 4, prompt_lookup_max=4, prompt_lookup_min=2)
DRAFT = SpeculationConfig("draft_model", 5, model="/models/draft")

VLLM_BASE = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--port", "8000", "--enforce-eager"]


def test_parse_command_understands_values_switches_equals_and_negative_numbers():
    p = parse_command(["serve", "M", "--a", "1", "--b=2", "--switch", "--top-k", "-1", "--lora", "x", "--lora", "y"])
    assert p.positionals == ("serve", "M")
    assert p.flags == {"--a": ("1",), "--b": ("2",), "--switch": (None,), "--top-k": ("-1",), "--lora": ("x", "y")}


def test_diff_ignores_flag_order_and_lists_exact_changes():
    a = ["srv", "--port", "1", "--dtype", "half", "--quiet"]
    b = ["srv", "--dtype=float", "--quiet", "--port", "1", "--new", "v"]
    d = command_diff(a, b)
    assert d.flags == ("--dtype", "--new")
    assert d.lines() == ["~ --dtype: half -> float", "+ --new v"]
    assert command_diff(a, ["srv", "--quiet", "--dtype", "half", "--port", "1"]).differences == ()  # reordered
    assert command_diff(["srv", "A"], ["srv", "B"]).flags == (POSITIONAL,)
    assert command_diff(a, a).lines() == ["(the commands are identical)"]


@pytest.mark.parametrize("kind", ["vllm", "speculab"])
def test_vllm_style_candidate_is_a_single_change(kind):
    ad = adapter_for(kind)
    cand = ad.candidate_command(VLLM_BASE, NGRAM)
    cfg = json.loads(cand[cand.index("--speculative-config") + 1])
    assert cfg == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    diff = diff_for(ad, VLLM_BASE, cand)
    assert diff.flags == ("--speculative-config",)
    assert is_single_change(diff, ad)
    draft = ad.candidate_command(VLLM_BASE, DRAFT)
    assert json.loads(draft[-1]) == {"method": "draft_model", "num_speculative_tokens": 5, "model": "/models/draft"}


def test_extra_differences_are_not_a_single_change():
    ad = adapter_for("vllm")
    cand = [*ad.candidate_command(VLLM_BASE, NGRAM), "--max-num-seqs", "8"]
    diff = diff_for(ad, VLLM_BASE, cand)
    assert set(diff.flags) == {"--speculative-config", "--max-num-seqs"}
    assert not is_single_change(diff, ad)
    assert not is_single_change(diff_for(ad, VLLM_BASE, VLLM_BASE), ad)  # nothing changed at all


def test_vllm_per_request_metrics_flag_is_part_of_speculation():
    ad = adapter_for("vllm")
    spec = SpeculationConfig("ngram", 4, engine_args=("--per-request-spec-decode-metrics", "summary"))
    assert is_single_change(diff_for(ad, VLLM_BASE, ad.candidate_command(VLLM_BASE, spec)), ad)


def test_baseline_that_already_speculates_is_refused():
    with pytest.raises(UserError, match="already has speculation flag --speculative-config"):
        adapter_for("vllm").candidate_command([*VLLM_BASE, "--speculative-config", "{}"], NGRAM)
    with pytest.raises(UserError, match="--spec-draft-model"):
        adapter_for("llamacpp").candidate_command(["llama-server", "-m", "x.gguf", "-md", "d.gguf"], DRAFT)


def test_sglang_flags():
    ad = adapter_for("sglang")
    base = ["python", "-m", "sglang.launch_server", "--model-path", "/m", "--port", "30000"]
    ng = ad.candidate_command(base, NGRAM)
    p = parse_command(ng).flags
    assert p["--speculative-algorithm"] == ("NGRAM",) and p["--speculative-num-draft-tokens"] == ("4",)
    assert p["--speculative-ngram-max-match-window-size"] == ("4",)
    assert p["--speculative-ngram-min-match-window-size"] == ("2",)
    dr = parse_command(ad.candidate_command(base, DRAFT)).flags
    assert dr["--speculative-algorithm"] == ("STANDALONE",)
    assert dr["--speculative-draft-model-path"] == ("/models/draft",)
    assert dr["--speculative-num-steps"] == ("5",) and dr["--speculative-num-draft-tokens"] == ("6",)
    assert is_single_change(diff_for(ad, base, ad.candidate_command(base, DRAFT)), ad)
    assert ad.acceptance.accept_length_gauge == "sglang:spec_accept_length"
    with pytest.raises(UserError, match="cannot run speculation method mtp"):
        ad.candidate_command(base, SpeculationConfig("mtp", 2))


def test_llamacpp_flags_and_aliases():
    # The spellings of the build scripts/install_llama_server.sh makes (llama-cpp-python 0.3.36's llama.cpp).
    ad = adapter_for("llamacpp")
    base = ["llama-server", "-m", "t.gguf", "--port", "8080", "-ngl", "99", "--metrics"]
    cand = ad.candidate_command(base, DRAFT)
    assert cand[len(base) :] == [
        "--spec-type", "draft-simple", "--spec-draft-model", "/models/draft", "--spec-draft-n-max", "5"
    ]  # fmt: skip
    assert is_single_change(diff_for(ad, base, cand), ad)
    # The user's own candidate spelled with short and old aliases: still only speculation flags, the same option.
    own = [*base, "-md", "/models/draft", "--draft", "5", "--draft-min", "1", "-ngld", "99", "-td", "2"]
    d = diff_for(ad, base, own)
    assert set(d.flags) == {
        "--spec-draft-model", "--spec-draft-n-max", "--spec-draft-n-min", "--spec-draft-ngl", "--spec-draft-threads"
    }  # fmt: skip
    assert is_single_change(d, ad)
    assert not diff_for(ad, [*base, "--model-draft", "d"], [*base, "-md", "d"]).differences
    ng = parse_command(ad.candidate_command(base, NGRAM)).flags
    assert ng["--spec-type"] == ("ngram-simple",) and ng["--spec-ngram-simple-size-m"] == ("4",)
    assert ng["--spec-ngram-simple-size-n"] == ("4",)
    assert is_single_change(diff_for(ad, base, [*base, "--spec-default"]), ad)
    # acceptance: llama.cpp's --metrics counters (vLLM semantics), and per response timings
    assert ad.acceptance.kind == "counters" and ad.acceptance.drafts == "llamacpp:spec_decode_num_drafts_total"
    assert ad.acceptance.accepted_per_position == "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
    assert ad.acceptance.response_fields["accepted_tokens"] == "timings.draft_n_accepted"
    # llama-server drops keep-alive connections after streamed responses: speculab asks it to close each one
    assert ad.keep_alive is False and all(adapter_for(k).keep_alive for k in ("vllm", "sglang", "speculab", "tgi"))


def test_tgi_and_other():
    tgi = adapter_for("tgi")
    base = ["text-generation-launcher", "--model-id", "m", "--port", "3000"]
    cand = tgi.candidate_command(base, NGRAM)
    assert cand[-2:] == ["--speculate", "4"] and is_single_change(diff_for(tgi, base, cand), tgi)
    with pytest.raises(UserError, match="tgi cannot run speculation method draft_model"):
        tgi.candidate_command(base, DRAFT)
    other = adapter_for("other")
    with pytest.raises(UserError, match=r"give candidate\.command"):
        other.candidate_command(["srv"], NGRAM)
    assert not is_single_change(command_diff(["srv"], ["srv", "--spec", "on"]), other)
    with pytest.raises(UserError, match="unknown engine"):
        adapter_for("ollama")


def test_engine_args_are_appended_and_checked():
    spec = SpeculationConfig("draft_model", 4, model="d.gguf", engine_args=("--spec-draft-p-min", "0.5"))
    ad = adapter_for("llamacpp")
    cand = ad.candidate_command(["llama-server", "-m", "t.gguf"], spec)
    assert cand[-2:] == ["--spec-draft-p-min", "0.5"]
    assert is_single_change(diff_for(ad, ["llama-server", "-m", "t.gguf"], cand), ad)
    bad = SpeculationConfig("ngram", 4, engine_args=("--max-num-seqs", "4"))
    assert not is_single_change(
        diff_for(adapter_for("vllm"), VLLM_BASE, adapter_for("vllm").candidate_command(VLLM_BASE, bad)),
        adapter_for("vllm"),
    )


def test_detect_engine():
    assert detect_engine(None, None, ["vllm:num_requests_running", "python_info"]) == "vllm"
    assert detect_engine(None, None, ["speculab:spec_decode_num_drafts_total"]) == "speculab"
    assert detect_engine(None, None, ["sglang:token_usage"]) == "sglang"
    assert detect_engine(None, None, ["llamacpp:prompt_tokens_total"]) == "llamacpp"
    assert detect_engine(None, None, ["tgi_request_count"]) == "tgi"
    assert detect_engine(None, {"object": "list", "data": [{"id": "m", "owned_by": "vllm"}]}) == "vllm"
    assert detect_engine(None, {"data": [{"id": "m", "owned_by": "llamacpp"}]}) == "llamacpp"
    assert detect_engine({"version": "0.32.0"}, {"data": [{"id": "m", "owned_by": "system"}]}) == "vllm"
    assert detect_engine({"name": "speculab", "version": "0.1.0"}, None) == "speculab"
    assert detect_engine(None, {"data": [{"id": "m", "owned_by": "openai"}]}, []) == "other"


def test_redact_command_hides_every_secret_flag_value_and_nothing_else():
    argv = ["speculab", "bench", "--api-key", "sk-1", "--api-key=sk-2", "--url", "http://h"]
    assert redact_command(argv) == ("speculab", "bench", "--api-key", "***", "--api-key=***", "--url", "http://h")
    serve = ["vllm", "serve", "m", "--hf-token", "hf_x", "--max-num-batched-tokens", "2048", "--auth_token=t",
             "--num-speculative-tokens", "4", "--ssl-keyfile", "/k.pem", "--token", "t", "--enforce-eager"]  # fmt: skip
    assert redact_command(serve) == (
        "vllm", "serve", "m", "--hf-token", "***", "--max-num-batched-tokens", "2048", "--auth_token=***",
        "--num-speculative-tokens", "4", "--ssl-keyfile", "/k.pem", "--token", "***", "--enforce-eager",
    )  # fmt: skip
    # a secret flag used as a bare switch (no value follows) hides nothing that is not its value
    assert redact_command(["srv", "--api-key", "--port", "8000"]) == ("srv", "--api-key", "--port", "8000")


def test_a_command_difference_never_prints_a_secret():
    d = command_diff(["srv", "--api-key", "old-key"], ["srv", "--api-key", "new-key", "--speculate", "4"])
    text = " ".join(d.lines()) + repr(d.to_dict())
    assert "old-key" not in text and "new-key" not in text and "--api-key" in text


def test_what_a_server_says_it_runs_becomes_flags_for_the_single_change_rule() -> None:
    """Issue 36: speculab serve's /version says its speculative config and arguments; the harness reads them as the
    flags they are, and applies launch mode's single-change rule to two servers it did not launch."""
    from speculab.harness.servers.adapters import served, served_change

    spec = {"method": "draft_model", "num_speculative_tokens": 3, "model": "demo-draft"}
    args = {"model": "demo", "max_num_seqs": 8, "metrics_public": True, "threads": None, "speculative_config": spec}
    said = served(adapter_for("speculab"), {"speculative_config": spec, "server_args": args})
    assert said is not None and (said.method, said.k) == ("draft_model", 3)
    assert said.command == (
        "--max-num-seqs", "8", "--metrics-public", "--model", "demo",
        "--speculative-config", '{"method": "draft_model", "model": "demo-draft", "num_speculative_tokens": 3}',
    )  # fmt: skip
    plain = served(
        adapter_for("speculab"), {"speculative_config": None, "server_args": args | {"speculative_config": None}}
    )
    assert plain is not None and plain.method is None and plain.k is None
    diff, single = served_change(adapter_for("speculab"), plain, said)
    assert single and diff.flags == ("--speculative-config",)
    wider = served(adapter_for("speculab"), {"speculative_config": spec, "server_args": args | {"max_num_seqs": 16}})
    assert wider is not None and served_change(adapter_for("speculab"), plain, wider)[1] is False
    # what a server does not say is unknown: another engine, an older release, a body of another shape
    assert served(adapter_for("vllm"), {"speculative_config": spec, "server_args": args}) is None
    bodies = (
        None,
        "0.1.0",
        {"version": "0.1.0"},
        {"server_args": args},
        {"speculative_config": 4, "server_args": args},
    )
    for body in (*bodies, {"speculative_config": None, "server_args": ["--model", "demo"]}):
        assert served(adapter_for("speculab"), body) is None, body
