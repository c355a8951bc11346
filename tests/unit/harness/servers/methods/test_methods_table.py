"""The methods table: each declared method's yes / no / unknown with its one-line reason and the flags it would add,
from fixture checkpoints shaped like real families."""

from __future__ import annotations

import json
from pathlib import Path

from speculab.harness.servers.methods.checkpoint import read_checkpoint
from speculab.harness.servers.methods.declared import DeclaredMethods, fallback
from speculab.harness.servers.methods.table import Given, MethodRow, methods_table, needs_of
from speculab.harness.servers.methods.vocab import vocab_match
from speculab.report.phrases import reason_text

FIXTURES = (Path(__file__).parent / "fixtures").resolve()  # read_checkpoint resolves the paths it is given
QWEN, QWEN_DRAFT, LLAMA_DRAFT = (
    FIXTURES / "qwen2.5-7b",
    FIXTURES / "qwen2.5-0.5b-draft",
    FIXTURES / "llama-3.2-1b-draft",
)
DEEPSEEK, EAGLE3, MEDUSA = FIXTURES / "deepseek-v3-mtp", FIXTURES / "eagle3-llama3.1-8b", FIXTURES / "medusa-qwen2.5-7b"


def said(row: MethodRow) -> str:
    """A row's reason as `speculab methods` prints it: the report's words for its record."""
    return reason_text(row.why)


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
             "custom_class": "custom_class", "mlp_speculator": "mlp_speculator", "dflash": "dflash",
             "DSPARK": "dspark", "draft-dflash": "dflash", "UNO": "unknown"}  # fmt: skip
    assert {n: needs_of(n) for n in cases} == cases


def test_mtp_is_yes_for_a_deepseek_v3_config_and_no_for_qwen():
    deepseek = _rows("vllm", _given(DEEPSEEK))
    assert deepseek["mtp"].available == "yes" and "num_nextn_predict_layers" in said(deepseek["mtp"])
    assert deepseek["deepseek_mtp"].available == "yes"
    other_family = deepseek["qwen3_next_mtp"]
    assert other_family.available == "no" and "for qwen3_next models" in said(other_family)
    qwen = _rows("vllm", _given(QWEN))["mtp"]
    assert qwen.available == "no" and "declares no MTP layers" in said(qwen)
    assert qwen.flags == ("--speculative-config", '{"method":"mtp","num_speculative_tokens":4}')
    assert _rows("vllm", _given())["mtp"].available == "unknown"  # no --model: nothing to read


def test_a_draft_with_the_targets_tokenizer_is_yes_and_one_with_another_vocabulary_no():
    same = _rows("vllm", _given(QWEN, QWEN_DRAFT))["draft_model"]
    assert same.available == "yes" and "identical vocabulary" in said(same)
    assert json.loads(same.flags[1])["model"] == str(QWEN_DRAFT) and same.path_flag is None
    other = _rows("llamacpp", _given(QWEN, LLAMA_DRAFT))["draft-simple"]
    assert other.available == "no" and "another vocabulary" in said(other)
    assert other.flags == ("--spec-type", "draft-simple", "--spec-draft-model", str(LLAMA_DRAFT), "--spec-draft-n-max",
                           "4")  # fmt: skip


def test_a_method_that_needs_a_path_not_given_says_which_flag():
    r = _rows("vllm", _given(QWEN))
    assert r["draft_model"].available == "no" and "--draft PATH" in said(r["draft_model"])
    assert r["draft_model"].path_flag == "--draft" and r["eagle3"].path_flag == "--head"
    assert json.loads(r["eagle3"].flags[1])["model"] == "PATH"
    assert r["ngram"].path_flag is None and r["ngram"].available == "yes"


def test_an_eagle_head_for_another_base_model_is_no_naming_both():
    r = _rows("vllm", _given(QWEN, head=EAGLE3))
    assert r["eagle3"].available == "no"
    assert "meta-llama/Llama-3.1-8B-Instruct" in said(r["eagle3"]) and "Qwen/Qwen2.5-7B-Instruct" in said(r["eagle3"])
    assert r["eagle"].available == "no" and "EAGLE-3 head" in said(r["eagle"])  # the wrong method for this head


def test_a_head_of_another_hidden_size_is_no_even_without_a_base_model_field(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps({"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 4096})
    )
    r = _rows("sglang", _given(QWEN, head=tmp_path))["EAGLE3"]
    assert r.available == "no" and "hidden_size 4096, the target 3584" in said(r)


def test_medusa_heads_for_this_target_are_yes():
    r = _rows("vllm", _given(QWEN, head=MEDUSA))["medusa"]
    assert r.available == "yes" and "Qwen/Qwen2.5-7B-Instruct" in said(r)


def test_a_head_given_as_draft_is_refused_with_the_fix():
    r = _rows("vllm", _given(QWEN, draft=EAGLE3))["draft_model"]
    assert r.available == "no" and "pass it as --head" in said(r)


def test_flags_come_from_the_adapters_with_k_for_every_method():
    r = _rows("vllm", _given(), ("ngram", "suffix"))
    assert json.loads(r["ngram"].flags[1]) == {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4,
                                               "prompt_lookup_min": 2}  # fmt: skip
    assert r["ngram"].experiment_method == "ngram" and r["suffix"].experiment_method is None
    assert r["suffix"].flags == ("--speculative-config", '{"method":"suffix","num_speculative_tokens":4}')
    sg = _rows("sglang", _given(), ("NGRAM", "NEXTN"))
    assert sg["NGRAM"].flags[:2] == ("--speculative-algorithm", "NGRAM") and sg["NGRAM"].experiment_method == "ngram"
    # NEXTN drafts from the target's own MTP layers as a chain of k steps: no draft path, k as SGLang counts it
    assert sg["NEXTN"].flags == ("--speculative-algorithm", "NEXTN", "--speculative-num-steps", "4",
                                 "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "5")  # fmt: skip
    lc = _rows("llamacpp", _given(), ("ngram-map-k", "ngram-cache", "draft-eagle3"))
    assert lc["ngram-map-k"].flags == ("--spec-type", "ngram-map-k", "--spec-ngram-map-k-size-m", "4")
    assert lc["ngram-cache"].flags == ("--spec-type", "ngram-cache")  # drafts a fixed 8: no flag sets k
    assert lc["draft-eagle3"].flags == ("--spec-type", "draft-eagle3", "--spec-draft-model", "PATH",
                                        "--spec-draft-n-max", "4")  # fmt: skip
    assert _rows("tgi", _given())["ngram"].flags == ("--speculate", "4")


def test_an_unknown_method_is_unknown_never_guessed():
    r = _rows("sglang", _given(QWEN), ("UNO",))["UNO"]
    assert r.available == "unknown" and "does not know what UNO needs" in said(r)
    r = _rows("vllm", _given(QWEN), ("custom_class",))["custom_class"]
    assert r.available == "unknown" and "a proposer class of your own" in said(r)  # no file can say


def test_family_specific_mtp_rows_carry_their_family():
    r = _rows("vllm", _given(QWEN))
    assert r["deepseek_mtp"].for_family == "deepseek" and r["mtp"].for_family is None


MLP, DFLASH = FIXTURES / "mlp-speculator-llama3-8b", FIXTURES / "dflash-qwen3-8b"


def _checkpoint(d: Path, config: dict, tensors: tuple[str, ...] = ()) -> Path:
    """A checkpoint directory: config.json, and a safetensors file whose header names `tensors` (no weights)."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(config))
    if tensors:
        header = json.dumps({t: {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]} for t in tensors}).encode()
        (d / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0\0")
    return d


LLAMA3_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "vocab_size": 128256,
             "_name_or_path": "meta-llama/Meta-Llama-3-8B-Instruct"}  # fmt: skip


def test_an_mlp_speculator_is_matched_by_its_emb_dim_and_vocabulary(tmp_path):
    facts = read_checkpoint(MLP)
    assert (facts.head_kind, facts.hidden_size, facts.heads, facts.heads_key) == (
        "mlp_speculator",
        4096,
        4,
        "n_predict",
    )
    yes = _rows("vllm", _given(_checkpoint(tmp_path / "llama3", LLAMA3_8B), head=MLP))["mlp_speculator"]
    assert yes.available == "yes" and "drafts at most 4 (n_predict)" in said(yes)
    assert json.loads(yes.flags[1]) == {"method": "mlp_speculator", "num_speculative_tokens": 4, "model": str(MLP)}
    no = _rows("vllm", _given(QWEN, head=MLP))["mlp_speculator"]
    assert no.available == "no" and "hidden_size 4096, the target 3584" in said(no)


def test_a_dflash_draft_is_told_from_its_architecture_and_matched_against_the_target():
    assert read_checkpoint(DFLASH).head_kind == "dflash"
    r = _rows("vllm", _given(QWEN, head=DFLASH))
    assert r["dflash"].available == "no" and "hidden_size 4096, the target 3584" in said(r["dflash"])
    assert r["eagle3"].available == "no" and "a DFlash head; use its method (dflash)" in said(r["eagle3"])
    sg = _rows("sglang", _given(QWEN, head=DFLASH), ("DFLASH",))["DFLASH"]  # k drafts: a verify block of k + 1
    assert sg.flags == ("--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", str(DFLASH),
                        "--speculative-num-draft-tokens", "5")  # fmt: skip


def test_dspark_stages_in_the_targets_own_weights_are_yes(tmp_path):
    cfg = {"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "hidden_size": 7168}
    stages = ("model.embed_tokens.weight", "mtp.0.markov_head.weight", "mtp.0.confidence_head.weight")
    v41 = _checkpoint(tmp_path / "dsv41", cfg, stages)
    r = _rows("vllm", _given(v41))["dspark"]
    assert r.available == "yes" and "ship DSpark stages" in said(r)
    r = _rows("vllm", _given(QWEN))["dspark"]
    assert r.available == "no" and "DSpark head trained for the target: pass --head PATH" in said(r)


def test_extract_hidden_states_drafts_nothing():
    r = _rows("vllm", _given(QWEN))["extract_hidden_states"]
    assert r.available == "no" and "drafts nothing" in said(r)


def test_tgi_medusa_is_yes_only_for_a_served_checkpoint_that_ships_the_heads():
    served = _rows("tgi", _given(MEDUSA))
    assert served["medusa"].available == "yes" and "--speculate at most 4 (medusa_num_heads)" in said(served["medusa"])
    assert "Qwen/Qwen2.5-7B-Instruct" in said(served["medusa"]) and served["medusa"].flags == ("--speculate", "4")
    assert served["ngram"].available == "no" and "ships a Medusa head" in said(served["ngram"])
    beside = _rows("tgi", _given(QWEN, head=MEDUSA))
    assert beside["medusa"].available == "no" and "serve medusa-qwen2.5-7b as --model-id" in said(beside["medusa"])
    plain = _rows("tgi", _given(QWEN))
    assert plain["ngram"].available == "yes" and plain["ngram"].flags == ("--speculate", "4")
    assert plain["medusa"].available == "no" and "(medusa_num_heads): pass it as --model" in said(plain["medusa"])
    assert plain["medusa"].path_flag == "--model" and plain["mlp_speculator"].available == "no"


def test_tgi_mlp_speculator_needs_the_base_model_it_loads(tmp_path):
    cfg = json.loads((MLP / "config.json").read_text())
    no_base = _rows("tgi", _given(_checkpoint(tmp_path / "a", cfg)))["mlp_speculator"]
    assert no_base.available == "no" and "names no base_model_name_or_path" in said(no_base)
    cfg["base_model_name_or_path"] = "meta-llama/Meta-Llama-3-8B-Instruct"
    ok = _rows("tgi", _given(_checkpoint(tmp_path / "b", cfg)))["mlp_speculator"]
    assert ok.available == "yes" and "--speculate at most 4 (n_predict)" in said(ok)


def test_tgi_flags_never_ask_for_more_tokens_than_the_checkpoint_has_heads(tmp_path):
    cfg = json.loads((MEDUSA / "config.json").read_text()) | {"medusa_num_heads": 2}
    r = _rows("tgi", _given(_checkpoint(tmp_path / "m2", cfg)))["medusa"]
    assert r.available == "yes" and r.flags == ("--speculate", "2")


def test_methods_url_says_what_a_speculab_server_runs_and_only_what_it_said() -> None:
    """Issue 36: the reference engine's /version says what it runs; `speculab methods --url` shows it beside what it
    could run, and says nothing where the server said nothing."""
    from rich.console import Console

    from speculab.harness.servers.methods.here import methods_here
    from speculab.harness.servers.methods.table import Given
    from speculab.report.console.methods import print_methods

    base = {"name": "speculab", "version": "0.1.0", "speculative_methods": ["ngram", "draft_model", "eagle"]}
    ngram = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
    args = {"model": "demo", "max_num_seqs": 8}

    def printed(version: dict) -> str:
        table = methods_here("speculab", Given(None, None, None, None), server_version=version, from_server=True)
        console = Console(record=True, width=200)
        print_methods(console, table)
        return console.export_text()

    said = base | {"speculative_config": ngram, "server_args": args | {"speculative_config": ngram}}
    assert "the server runs: ngram k=4 (its /version)" in printed(said)
    plain = base | {"speculative_config": None, "server_args": args | {"speculative_config": None}}
    assert "the server runs: plain decoding (its /version)" in printed(plain)
    assert "the server runs" not in printed(base)  # an older release: unknown, never "plain"
