"""Checkpoint facts from config.json and tokenizer files shaped like real families: MTP layers under their family
names, heads and the base model they name, a draft's vocabulary against the target's."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from speculab.errors import UserError
from speculab.harness.servers.methods.checkpoint import read_checkpoint, same_model
from speculab.harness.servers.methods.vocab import compare_vocab, read_vocab, vocab_match
from speculab.report.words import vocab_words

FIXTURES = Path(__file__).parent / "fixtures"
QWEN, QWEN_DRAFT, LLAMA_DRAFT = (
    FIXTURES / "qwen2.5-7b",
    FIXTURES / "qwen2.5-0.5b-draft",
    FIXTURES / "llama-3.2-1b-draft",
)
DEEPSEEK, EAGLE3, MEDUSA = FIXTURES / "deepseek-v3-mtp", FIXTURES / "eagle3-llama3.1-8b", FIXTURES / "medusa-qwen2.5-7b"


def _write(d: Path, config: dict, tokenizer_vocab: dict[str, int] | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(config))
    if tokenizer_vocab is not None:
        (d / "tokenizer.json").write_text(json.dumps({"model": {"type": "BPE", "vocab": tokenizer_vocab}}))
    return d


def test_deepseek_v3_declares_its_mtp_layer_under_num_nextn_predict_layers():
    f = read_checkpoint(DEEPSEEK)
    assert (f.mtp_layers, f.mtp_key, f.model_type) == (1, "num_nextn_predict_layers", "deepseek_v3")
    assert (f.architecture, f.vocab_size, f.hidden_size, f.head_kind) == ("DeepseekV3ForCausalLM", 129280, 7168, None)


def test_qwen2_declares_no_mtp_layers():
    f = read_checkpoint(QWEN)
    assert (f.mtp_layers, f.mtp_key) == (0, None)
    assert (f.architecture, f.vocab_size, f.hidden_size) == ("Qwen2ForCausalLM", 152064, 3584)


def test_qwen3_next_style_mtp_key_and_a_multimodal_text_config(tmp_path):
    qwen3_next = read_checkpoint(_write(tmp_path / "a", {"model_type": "qwen3_next", "mtp_num_hidden_layers": 1}))
    assert (qwen3_next.mtp_layers, qwen3_next.mtp_key) == (1, "mtp_num_hidden_layers")
    vlm = {"architectures": ["Glm4vMoeForConditionalGeneration"], "model_type": "glm4v_moe",
           "text_config": {"num_nextn_predict_layers": 2, "hidden_size": 4096, "vocab_size": 151552}}  # fmt: skip
    f = read_checkpoint(_write(tmp_path / "b", vlm))
    assert (f.mtp_layers, f.hidden_size, f.vocab_size) == (2, 4096, 151552)


def test_zero_mtp_layers_is_none(tmp_path):
    assert read_checkpoint(_write(tmp_path, {"num_nextn_predict_layers": 0})).mtp_layers == 0


def test_an_eagle3_head_in_speculators_format_names_its_verifier():
    f = read_checkpoint(EAGLE3)
    assert (f.head_kind, f.base_model, f.hidden_size, f.draft_vocab_size) == (
        "eagle3", "meta-llama/Llama-3.1-8B-Instruct", 4096, 32000
    )  # fmt: skip


def test_medusa_heads_name_their_base_model():
    f = read_checkpoint(MEDUSA)
    assert (f.head_kind, f.base_model, f.hidden_size) == ("medusa", "Qwen/Qwen2.5-7B-Instruct", 3584)


def test_an_eagle1_head_in_llama_form_is_told_by_its_fc_tensor(tmp_path):
    d = _write(tmp_path, {"architectures": ["LlamaForCausalLM"], "hidden_size": 3584, "num_hidden_layers": 1})
    assert read_checkpoint(d).head_kind is None  # an ordinary one-layer Llama, as far as config.json says
    header = json.dumps({"fc.weight": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}}).encode()
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    assert read_checkpoint(d).head_kind == "eagle"


def test_same_model_compares_the_last_path_part():
    qwen = read_checkpoint(QWEN)
    assert same_model("Qwen/Qwen2.5-7B-Instruct", qwen)  # its config's _name_or_path
    assert same_model("/models/qwen2.5-7b/", qwen)  # its directory's name
    assert not same_model("meta-llama/Llama-3.1-8B-Instruct", qwen)


@pytest.mark.parametrize(
    ("setup", "needle"),
    [
        (lambda d: None, "not a directory"),
        (lambda d: d.mkdir(), "has no config.json"),
        (lambda d: (d.mkdir(), (d / "config.json").write_text("{not json")), "not valid JSON"),
        (lambda d: (d.mkdir(), (d / "config.json").write_text("[1]")), "not a JSON object"),
    ],
)
def test_a_broken_checkpoint_is_one_line_naming_it(tmp_path, setup, needle):
    d = tmp_path / "ckpt"
    setup(d)
    with pytest.raises(UserError) as e:
        read_checkpoint(d)
    assert needle in str(e.value) and str(d.resolve()) in str(e.value) and "\n" not in str(e.value)


def test_a_draft_with_the_targets_tokenizer_is_identical_though_its_embeddings_are_smaller():
    m = vocab_match(QWEN, QWEN_DRAFT)
    assert m.kind == "identical"
    assert read_checkpoint(QWEN).vocab_size != read_checkpoint(QWEN_DRAFT).vocab_size  # 152064 vs 151936 rows


def test_a_draft_with_another_vocabulary_is_different():
    m = vocab_match(QWEN, LLAMA_DRAFT)
    assert m.kind == "different" and m.shared is not None and m.draft_tokens is not None
    assert m.shared / m.draft_tokens < 0.9  # below the share an id mapping needs
    assert vocab_words(m.to_fields()).startswith("another vocabulary: ")  # the report's words


def test_same_tokens_under_other_ids_need_a_mapping():
    target = {f"t{i}": i for i in range(100)}
    draft = {f"t{i}": 99 - i for i in range(100)}
    m = compare_vocab(target, draft)
    assert m.kind == "mapping" and m.shared == 100 and m.same_id == 0
    said = "100 of the draft's 100 tokens are the target's, 100 under other ids: needs an id mapping"
    assert vocab_words(m.to_fields()) == said


def test_a_target_that_adds_a_few_tokens_at_the_end_is_a_prefix_match():
    draft = {f"t{i}": i for i in range(100)}
    m = compare_vocab(draft | {"<extra>": 100, "<more>": 101}, draft)
    assert (m.kind, m.target_tokens, m.draft_tokens) == ("prefix", 102, 100)
    assert vocab_words(m.to_fields()) == "same ids; the target adds 2 token(s) at the end (100 vs 102)"
    far = compare_vocab(draft | {f"x{i}": 100 + i for i in range(200)}, draft)
    assert far.kind != "prefix"  # past llama.cpp's 128-token allowance


def test_no_tokenizer_file_is_unknown(tmp_path):
    bare = _write(tmp_path / "bare", {"vocab_size": 10})
    assert read_vocab(bare) is None
    assert vocab_match(QWEN, bare).kind == "unknown"


def test_unigram_vocab_lists_and_vocab_json(tmp_path):
    d = tmp_path / "u"
    d.mkdir()
    (d / "tokenizer.json").write_text(json.dumps({"model": {"type": "Unigram", "vocab": [["<unk>", 0], ["a", -1.5]]}}))
    assert read_vocab(d) == {"<unk>": 0, "a": 1}
    v = tmp_path / "v"
    v.mkdir()
    (v / "vocab.json").write_text(json.dumps({"a": 0, "b": 1}))
    assert read_vocab(v) == {"a": 0, "b": 1}


def test_a_broken_tokenizer_is_one_line(tmp_path):
    d = tmp_path / "t"
    d.mkdir()
    (d / "tokenizer.json").write_text("{")
    with pytest.raises(UserError, match=r"tokenizer\.json is not valid JSON"):
        read_vocab(d)
