"""`speculab methods`' reasons in words: each METHOD_* record says the sentence the table said when its reasons were
strings (#48 item 3), and the terminal's table prints those words."""

from __future__ import annotations

import io

from rich.console import Console

from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.servers.methods.declared import DeclaredMethods
from speculab.harness.servers.methods.table import Given, MethodRow, MethodsTable
from speculab.report.console.methods import print_methods
from speculab.report.phrases import reason_text
from speculab.report.words import METHOD_WORDS, vocab_words

K = WarningKind
VOCAB = {"kind": "prefix", "target_tokens": 102, "draft_tokens": 100, "shared": 100, "same_id": 100}
# one record of every kind with the sentence it must say (the table's words before records)
SAID = [
    (K.METHOD_FROM_PROMPT, {"gpu": False}, "drafts from the prompt and the output so far: needs no other model"),
    (
        K.METHOD_FROM_PROMPT,
        {"gpu": True},
        "drafts from the prompt and the output so far: needs no other model (a GPU implementation)",
    ),
    (K.METHOD_NEEDS_DRAFT, {}, "needs a draft model with the target's tokenizer: pass --draft PATH"),
    (
        K.METHOD_DRAFT_IS_HEAD,
        {"name": "e3", "head": "eagle3"},
        "e3 is an EAGLE-3 head, not a draft model: pass it as --head",
    ),
    (K.METHOD_DRAFT_NEEDS_TARGET, {}, "pass --model too: the draft's vocabulary is compared with the target's"),
    (
        K.METHOD_DRAFT_VOCAB,
        {"name": "d", "engine": "vllm", "accepts": None, "vocab": {**VOCAB, "kind": "identical", "draft_tokens": 13}},
        "d: identical vocabulary (13 tokens)",
    ),
    (
        K.METHOD_DRAFT_VOCAB,
        {"name": "d", "engine": "llamacpp", "accepts": "llama.cpp accepts up to 128", "vocab": VOCAB},
        "same ids; the target adds 2 token(s) at the end (100 vs 102) (llama.cpp accepts up to 128)",
    ),
    (
        K.METHOD_DRAFT_VOCAB,
        {"name": "d", "engine": "vllm", "accepts": None, "vocab": VOCAB},
        "same ids; the target adds 2 token(s) at the end (100 vs 102); an engine that needs equal vocabularies "
        "refuses it",
    ),
    (
        K.METHOD_DRAFT_VOCAB,
        {"name": "d", "engine": "sglang", "accepts": None, "vocab": {**VOCAB, "kind": "mapping", "same_id": 10}},
        "100 of the draft's 100 tokens are the target's, 90 under other ids: needs an id mapping, which sglang does "
        "not apply",
    ),
    (
        K.METHOD_DRAFT_VOCAB,
        {"name": "d", "engine": "vllm", "accepts": None, "vocab": {**VOCAB, "kind": "different", "shared": 18}},
        "another vocabulary: 18% of the draft's 100 tokens are in the target's 102",
    ),
    (
        K.METHOD_DRAFT_VOCAB,
        {"name": "d", "engine": "vllm", "accepts": None, "vocab": {**VOCAB, "kind": "unknown", "draft_tokens": None}},
        "the draft has no tokenizer.json or vocab.json to compare",
    ),
    (K.METHOD_NEEDS_HEAD, {"head": "medusa"}, "needs a Medusa head trained for the target: pass --head PATH"),
    (
        K.METHOD_NOT_A_HEAD,
        {"name": "q", "architecture": "Qwen2ForCausalLM"},
        "q does not say it is a head (architecture Qwen2ForCausalLM); cannot check it",
    ),
    (K.METHOD_OTHER_HEAD, {"name": "h", "head": "dflash"}, "h is a DFlash head; use its method (dflash)"),
    (
        K.METHOD_HEAD_NEEDS_TARGET,
        {},
        "pass --model too: the head's base model and hidden size are matched against the target",
    ),
    (
        K.METHOD_HEAD_OTHER_BASE,
        {"name": "h", "base_model": "meta-llama/L", "target": "Qwen/Q"},
        "h was trained for meta-llama/L, the target is Qwen/Q",
    ),
    (
        K.METHOD_HEAD_MISMATCH,
        {"name": "h", "key": "vocab_size", "head_value": 5, "target_value": 152064},
        "h has vocab_size 5, the target 152064: trained for another model",
    ),
    (
        K.METHOD_HEAD_MATCHES,
        {"name": "h", "hidden_size": 3584, "base_model": "Qwen/Q", "heads": 4, "heads_key": "medusa_num_heads"},
        "h matches the target (hidden_size 3584, base model Qwen/Q); drafts at most 4 (medusa_num_heads)",
    ),
    (
        K.METHOD_HEAD_MATCHES,
        {"name": "h", "hidden_size": 4096, "base_model": None, "heads": None, "heads_key": None},
        "h matches the target (hidden_size 4096, no base model named)",
    ),
    (K.METHOD_DSPARK_IN_TARGET, {"name": "t"}, "t's weights ship DSpark stages (markov_head, confidence_head)"),
    (
        K.METHOD_HEADS_NO_BASE,
        {"name": "m", "engine_name": "TGI"},
        "m names no base_model_name_or_path, the model TGI loads under its heads",
    ),
    (
        K.METHOD_HEADS_IN_TARGET,
        {
            "name": "m",
            "head": "medusa",
            "base_model": "Qwen/Q",
            "k_flag": "--speculate",
            "heads": 4,
            "heads_key": "medusa_num_heads",
            "plain": "--speculate 0",
        },
        "m ships a Medusa head for Qwen/Q: --speculate at most 4 (medusa_num_heads); the baseline needs --speculate 0",
    ),
    (
        K.METHOD_HEADS_IN_TARGET,
        {
            "name": "m",
            "head": "mlp_speculator",
            "base_model": "L",
            "k_flag": "--speculate",
            "heads": None,
            "heads_key": None,
            "plain": "--speculate 0",
        },
        "m ships an MLP-speculator head for L: --speculate N; the baseline needs --speculate 0",
    ),
    (
        K.METHOD_HEAD_SERVED_ONLY,
        {"engine_name": "TGI", "head": "medusa", "name": "m", "model_flag": "--model-id"},
        "TGI loads a Medusa head only from the served checkpoint: serve m as --model-id",
    ),
    (
        K.METHOD_HEAD_NOT_SHIPPED,
        {"engine_name": "TGI", "head": "medusa", "key": "medusa_num_heads"},
        "TGI runs a Medusa head only when the served checkpoint ships it (medusa_num_heads): pass it as --model",
    ),
    (
        K.METHOD_NGRAM_BESIDE_HEADS,
        {"name": "m", "head": "medusa", "engine_name": "TGI", "k_flag": "--speculate", "gpu": False},
        "m ships a Medusa head, which TGI's --speculate uses instead: serve its base model for n-gram",
    ),
    (K.METHOD_MTP_NEEDS_TARGET, {}, "pass --model: MTP layers are read from the target's config.json"),
    (
        K.METHOD_NO_MTP,
        {"name": "q"},
        "q's config.json declares no MTP layers (num_nextn_predict_layers, mtp_num_hidden_layers)",
    ),
    (
        K.METHOD_MTP_OTHER_FAMILY,
        {"family": "qwen3_next", "model_type": "deepseek_v3"},
        "for qwen3_next models; the target is deepseek_v3",
    ),
    (
        K.METHOD_MTP,
        {"name": "d", "layers": 1, "key": "num_nextn_predict_layers", "model_type": "deepseek_v3"},
        "d: 1 MTP layer(s) (num_nextn_predict_layers, deepseek_v3)",
    ),
    (
        K.METHOD_CUSTOM_CLASS,
        {},
        "a proposer class of your own (model: package.module.Class); no file says what it needs",
    ),
    (K.METHOD_EXTRACTS_STATES, {}, "extracts the target's hidden states (to train a head); it drafts nothing"),
    (
        K.METHOD_NEEDS_UNKNOWN,
        {"method": "UNO", "engine": "sglang"},
        "speculab does not know what UNO needs; see sglang's documentation",
    ),
    (
        K.METHOD_UNAVAILABLE,
        {"method": "eagle", "why": "needs foo, which is not installed for python"},
        "eagle needs foo, which is not installed for python",
    ),
]


def test_every_method_reason_says_its_sentence():
    for kind, fields, sentence in SAID:
        assert reason_text(ReportWarning(kind, fields=fields)) == sentence, kind
    assert {k for k, _, _ in SAID} == set(METHOD_WORDS)  # each kind pinned, and each is worded


def test_vocabulary_words_for_each_kind():
    assert vocab_words({**VOCAB, "kind": "identical"}) == "identical vocabulary"
    assert vocab_words({**VOCAB, "target_tokens": 98}) == "same ids; the draft adds 2 token(s) at the end (100 vs 98)"
    assert vocab_words({**VOCAB, "kind": "unknown", "target_tokens": None}) == (
        "the target has no tokenizer.json or vocab.json to compare"
    )
    assert vocab_words({**VOCAB, "kind": "different", "draft_tokens": 0, "shared": 0}) == (
        "another vocabulary: 0% of the draft's 0 tokens are in the target's 102"
    )


def test_the_terminal_table_prints_each_rows_words_and_folds_family_mtp_rows():
    head = ReportWarning(K.METHOD_OTHER_HEAD, fields={"name": "h", "head": "eagle3"})
    family = ReportWarning(K.METHOD_MTP_OTHER_FAMILY, fields={"family": "qwen3_next", "model_type": "llama"})
    rows = (
        MethodRow("eagle", "no", head, (), "eagle", "eagle"),
        MethodRow("qwen3_next_mtp", "no", family, (), "mtp", None, for_family="qwen3_next"),
        MethodRow("glm4_moe_mtp", "no", family, (), "mtp", None, for_family="glm4_moe"),
    )
    out = io.StringIO()
    print_methods(
        Console(file=out, width=300), MethodsTable(DeclaredMethods("vllm", "0.1", ("x",), "t"), Given(), rows)
    )
    text = out.getvalue()
    assert "h is an EAGLE-3 head; use its method (eagle3)" in text
    # two family rows with one reason: one row, that reason's words
    assert "2 family MTP methods" in text
    assert text.count("for qwen3_next models; the target is llama") == 1
