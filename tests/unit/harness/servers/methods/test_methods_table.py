"""The methods table: each declared method's yes / no / unknown with its one-line reason and the flags it would add,
from fixture checkpoints shaped like real families."""

from __future__ import annotations

import json
from pathlib import Path

from speculab.harness.servers.methods.checkpoint import read_checkpoint
from speculab.harness.servers.methods.declared import DeclaredMethods, fallback
from speculab.harness.servers.methods.table import Given, methods_table, needs_of
from speculab.harness.servers.methods.vocab import vocab_match

FIXTURES = (Path(__file__).parent / "fixtures").resolve()  # read_checkpoint resolves the paths it is given
QWEN, QWEN_DRAFT, LLAMA_DRAFT = (
    FIXTURES / "qwen2.5-7b",
    FIXTURES / "qwen2.5-0.5b-draft",
    FIXTURES / "llama-3.2-1b-draft",
)
DEEPSEEK, EAGLE3, MEDUSA = FIXTURES / "deepseek-v3-mtp", FIXTURES / "eagle3-llama3.1-8b", FIXTURES / "medusa-qwen2.5-7b"


def _given(target: Path | None = None, draft: Path | None = None, head: Path | None = None) -> Given:
    vocab = vocab_match(target, draft) if target and draft else None
    return Given(*(read_checkpoint(p) if p else None for p in (target, draft, head)), vocab)


def _rows(engine: str, given: Given, methods: tuple[str, ...] | None = None) -> dict:
    declared = fallback(engine) if methods is None else DeclaredMethods(engine, "test", methods, "test")
    return {r.method: r for r in methods_table(declared, given).rows}


def test_needs_from_method_names_in_each_engines_spelling():
    cases = {"ngram": "prompt", "ngram-simple": "prompt", "suffix": "prompt", "NGRAM": "prompt", "draft_model": "draft",
             "draft-simple": "draft", "STANDALONE": "draft", "eagle": "eagle", "EAGLE3": "eagle3",
             "draft-eagle3": "eagle3", "deepseek_mtp": "mtp", "draft-mtp": "mtp", "NEXTN": "mtp", "medusa": "medusa",
             "custom_class": "unknown"}  # fmt: skip
    assert {n: needs_of(n) for n in cases} == cases


def test_mtp_is_yes_for_a_deepseek_v3_config_and_no_for_qwen():
    deepseek = _rows("vllm", _given(DEEPSEEK))
    assert deepseek["mtp"].available == "yes" and "num_nextn_predict_layers" in deepseek["mtp"].why
    assert deepseek["deepseek_mtp"].available == "yes"
    other_family = deepseek["qwen3_next_mtp"]
    assert other_family.available == "no" and "for qwen3_next models" in other_family.why
    qwen = _rows("vllm", _given(QWEN))["mtp"]
    assert qwen.available == "no" and "declares no MTP layers" in qwen.why
    assert qwen.flags == ("--speculative-config", '{"method":"mtp","num_speculative_tokens":4}')
    assert _rows("vllm", _given())["mtp"].available == "unknown"  # no --model: nothing to read


def test_a_draft_with_the_targets_tokenizer_is_yes_and_one_with_another_vocabulary_no():
    same = _rows("vllm", _given(QWEN, QWEN_DRAFT))["draft_model"]
    assert same.available == "yes" and "identical vocabulary" in same.why
    assert json.loads(same.flags[1])["model"] == str(QWEN_DRAFT) and same.path_flag is None
    other = _rows("llamacpp", _given(QWEN, LLAMA_DRAFT))["draft-simple"]
    assert other.available == "no" and "another vocabulary" in other.why
    assert other.flags == ("--spec-type", "draft-simple", "--spec-draft-model", str(LLAMA_DRAFT), "--spec-draft-n-max",
                           "4")  # fmt: skip


def test_a_method_that_needs_a_path_not_given_says_which_flag():
    r = _rows("vllm", _given(QWEN))
    assert r["draft_model"].available == "no" and "--draft PATH" in r["draft_model"].why
    assert r["draft_model"].path_flag == "--draft" and r["eagle3"].path_flag == "--head"
    assert json.loads(r["eagle3"].flags[1])["model"] == "PATH"
    assert r["ngram"].path_flag is None and r["ngram"].available == "yes"


def test_an_eagle_head_for_another_base_model_is_no_naming_both():
    r = _rows("vllm", _given(QWEN, head=EAGLE3))
    assert r["eagle3"].available == "no"
    assert "meta-llama/Llama-3.1-8B-Instruct" in r["eagle3"].why and "Qwen/Qwen2.5-7B-Instruct" in r["eagle3"].why
    assert r["eagle"].available == "no" and "EAGLE-3 head" in r["eagle"].why  # the wrong method for this head


def test_a_head_of_another_hidden_size_is_no_even_without_a_base_model_field(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096})
    )
    r = _rows("sglang", _given(QWEN, head=tmp_path))["EAGLE3"]
    assert r.available == "no" and "hidden_size 4096, the target 3584" in r.why


def test_medusa_heads_for_this_target_are_yes():
    r = _rows("vllm", _given(QWEN, head=MEDUSA))["medusa"]
    assert r.available == "yes" and "Qwen/Qwen2.5-7B-Instruct" in r.why


def test_a_head_given_as_draft_is_refused_with_the_fix():
    r = _rows("vllm", _given(QWEN, draft=EAGLE3))["draft_model"]
    assert r.available == "no" and "pass it as --head" in r.why


def test_flags_come_from_the_adapters_for_todays_methods_and_the_engines_switch_otherwise():
    r = _rows("vllm", _given(), ("ngram", "suffix"))
    assert json.loads(r["ngram"].flags[1]) == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4,
                                               "prompt_lookup_min": 2}  # fmt: skip
    assert r["ngram"].experiment_method == "ngram" and r["suffix"].experiment_method is None
    assert r["suffix"].flags == ("--speculative-config", '{"method":"suffix","num_speculative_tokens":4}')
    sg = _rows("sglang", _given(), ("NGRAM", "NEXTN"))
    assert sg["NGRAM"].flags[:2] == ("--speculative-algorithm", "NGRAM") and sg["NGRAM"].experiment_method == "ngram"
    assert sg["NEXTN"].flags == ("--speculative-algorithm", "NEXTN")
    assert _rows("tgi", _given())["ngram"].flags == ("--speculate", "4")


def test_an_unknown_method_is_unknown_never_guessed():
    r = _rows("vllm", _given(QWEN), ("custom_class",))["custom_class"]
    assert r.available == "unknown" and "does not know what custom_class needs" in r.why


def test_family_specific_mtp_rows_carry_their_family():
    r = _rows("vllm", _given(QWEN))
    assert r["deepseek_mtp"].for_family == "deepseek" and r["mtp"].for_family is None
