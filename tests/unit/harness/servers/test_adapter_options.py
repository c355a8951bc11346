"""A method outside speculab's five carries its k and its other keys into each engine's own config form: vLLM and
speculab as --speculative-config JSON keys, SGLang as --speculative-* flags, llama.cpp as --spec-* flags (k through
the flag that build reads for that --spec-type), TGI as --speculate N alone; an option that repeats an entry's own
key is one line naming that key."""

from __future__ import annotations

import json

import pytest

from speculab.config import SpeculationConfig, parse_experiment
from speculab.errors import UserError
from speculab.harness.servers.adapters import adapter_for, command_diff, parse_command

BASE = ["srv", "--port", "1"]


def _added(engine: str, spec: SpeculationConfig, base: list[str] = BASE) -> list[str]:
    return adapter_for(engine).candidate_command(base, spec)[len(base) :]


def test_vllm_suffix_carries_k_and_its_options_in_the_json():
    added = _added("vllm", SpeculationConfig("suffix", 6, options={"suffix_decoding_max_tree_depth": 32}))
    assert added[0] == "--speculative-config"
    assert json.loads(added[1]) == {
        "method": "suffix",
        "num_speculative_tokens": 6,
        "suffix_decoding_max_tree_depth": 32,
    }


def test_sglang_options_become_speculative_flags_and_replace_the_derived_companions():
    spec = SpeculationConfig("eagle3", 3, model="/h", options={"eagle_topk": 4, "speculative_num_draft_tokens": 8,
                                                                "use_rejection_sampling": True})  # fmt: skip
    assert _added("sglang", spec) == [
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/h", "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8", "--speculative-use-rejection-sampling",
    ]  # fmt: skip
    dspark = _added("sglang", SpeculationConfig("DSPARK", 7, model="/d"))
    assert dspark[-2:] == ["--speculative-dspark-block-size", "7"]  # gamma = k; SGLang sets the window to k + 1


def test_an_option_that_repeats_an_entrys_own_key_is_refused_naming_it():
    with pytest.raises(UserError, match=r"options.num_steps: --speculative-num-steps is set by speculation.num_spec"):
        _added("sglang", SpeculationConfig("NEXTN", 3, options={"num_steps": 5}))
    with pytest.raises(UserError, match=r"set by speculation.model"):
        _added("llamacpp", SpeculationConfig("draft-eagle3", 3, model="/h", options={"draft_model": "/x"}))
    with pytest.raises(UserError, match="cannot be passed as a flag"):
        _added("sglang", SpeculationConfig("NGRAM", 3, options={"use_rejection_sampling": False}))
    y = """
workload: "synthetic:input=10,output=8"
loads: {operating: {concurrency: 1}}
baseline: {url: "http://a:1"}
candidate: {url: "http://b:2"}
speculation: {method: suffix, num_speculative_tokens: 3, options: {num_speculative_tokens: 5}}
"""
    with pytest.raises(UserError, match="give it as the speculation entry's own key `num_speculative_tokens`"):
        parse_experiment(y)


def test_llamacpp_k_goes_to_the_flag_that_spec_type_reads():
    spec = SpeculationConfig("ngram-mod", 5, options={"ngram_mod_n_match": 3})
    assert _added("llamacpp", spec) == ["--spec-type", "ngram-mod", "--spec-ngram-mod-n-max", "5",
                                        "--spec-ngram-mod-n-match", "3"]  # fmt: skip
    assert _added("llamacpp", SpeculationConfig("draft-mtp", 2))[-2:] == ["--spec-draft-n-max", "2"]
    with pytest.raises(UserError, match="ngram-cache drafts a fixed 8 tokens"):
        _added("llamacpp", SpeculationConfig("ngram-cache", 4))
    with pytest.raises(UserError, match=r"does not know which llama.cpp flag sets k for it"):
        _added("llamacpp", SpeculationConfig("ngram-future", 4))


def test_tgi_medusa_replaces_the_baselines_speculate_0_and_takes_no_options():
    base = ["text-generation-launcher", "--model-id", "/medusa", "--speculate", "0"]
    cand = adapter_for("tgi").candidate_command(base, SpeculationConfig("medusa", 3))
    assert cand == ["text-generation-launcher", "--model-id", "/medusa", "--speculate", "3"]
    diff = command_diff(base, cand)
    assert [d.flag for d in diff.differences] == ["--speculate"]  # the single change: 0 -> 3
    with pytest.raises(UserError, match=r"add `--speculate 0` to baseline.launch.command"):
        adapter_for("tgi").candidate_command(base[:-2], SpeculationConfig("medusa", 3))
    with pytest.raises(UserError, match="TGI takes no speculation options"):
        adapter_for("tgi").candidate_command(base, SpeculationConfig("ngram", 3, options={"x": 1}))
    ngram = adapter_for("tgi").candidate_command(base[:-2], SpeculationConfig("ngram", 2))
    assert parse_command(ngram).flags["--speculate"] == ("2",)
    with pytest.raises(UserError, match="already has speculation flag --speculate"):
        adapter_for("tgi").candidate_command([*base[:-2], "--speculate", "2"], SpeculationConfig("ngram", 2))
