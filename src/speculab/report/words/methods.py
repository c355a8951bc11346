"""The sentences of `speculab methods`' reasons: why a method can run here or cannot (`MethodRow.why`, a record of a
METHOD_* kind), and how a draft's vocabulary relates to the target's, made from the checkpoints' facts when rendering.
`phrases.reason_text` says them (the terminal's methods table, and init's commented entries through the CLI);
`words.WORDS` registers them with every other kind's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from speculab.harness.results.warnings import WarningKind

Fields = Mapping[str, Any]

# what each head kind is called in a sentence
HEADS = {
    "eagle3": "an EAGLE-3",
    "eagle": "an EAGLE",
    "medusa": "a Medusa",
    "mlp_speculator": "an MLP-speculator",
    "dflash": "a DFlash",
    "dspark": "a DSpark",
}


def vocab_words(v: Fields) -> str:
    """A draft's vocabulary against the target's (`servers.methods.vocab.VocabMatch`'s numbers) in one line."""
    nt, nd, kind = v.get("target_tokens"), v.get("draft_tokens"), v["kind"]
    if kind == "unknown":
        side = "the target" if nt is None else "the draft"
        return f"{side} has no tokenizer.json or vocab.json to compare"
    if kind == "identical":
        return "identical vocabulary"
    if kind == "prefix":
        who = "target" if nt > nd else "draft"
        return f"same ids; the {who} adds {abs(nt - nd)} token(s) at the end ({nd} vs {nt})"
    shared, same_id = v["shared"], v["same_id"]
    if kind == "mapping":
        return (
            f"{shared} of the draft's {nd} tokens are the target's, {shared - same_id} under other ids: needs an id "
            "mapping"
        )
    pct = 100 * shared / nd if nd else 0.0
    return f"another vocabulary: {pct:.0f}% of the draft's {nd} tokens are in the target's {nt}"


def _draft_vocab(f: Fields) -> str:
    v = f["vocab"]
    if v["kind"] == "identical":
        return f"{f['name']}: identical vocabulary ({v['draft_tokens']} tokens)"
    said = vocab_words(v)
    if v["kind"] == "prefix":
        accepts = f.get("accepts")
        return f"{said} ({accepts})" if accepts else f"{said}; an engine that needs equal vocabularies refuses it"
    if v["kind"] == "mapping":
        return f"{said}, which {f['engine']} does not apply"
    return said


def _gpu(f: Fields) -> str:
    """What an n-gram method's reason adds when it runs on the accelerator (vLLM's ngram_gpu)."""
    return " (a GPU implementation)" if f.get("gpu") else ""


def _head_matches(f: Fields) -> str:
    base = f"base model {f['base_model']}" if f.get("base_model") else "no base model named"
    most = f"; drafts at most {f['heads']} ({f['heads_key']})" if f.get("heads") else ""
    return f"{f['name']} matches the target (hidden_size {f['hidden_size']}, {base}){most}"


def _heads_in_target(f: Fields) -> str:
    most = f"{f['k_flag']} at most {f['heads']} ({f['heads_key']})" if f.get("heads") else f"{f['k_flag']} N"
    return f"{f['name']} ships {HEADS[f['head']]} head for {f['base_model']}: {most}; the baseline needs {f['plain']}"


METHOD_WORDS: dict[WarningKind, Callable[[Fields], str]] = {
    WarningKind.METHOD_FROM_PROMPT: lambda f: (
        "drafts from the prompt and the output so far: needs no other model" + _gpu(f)
    ),
    WarningKind.METHOD_NEEDS_DRAFT: lambda f: "needs a draft model with the target's tokenizer: pass --draft PATH",
    WarningKind.METHOD_DRAFT_IS_HEAD: lambda f: (
        f"{f['name']} is {HEADS[f['head']]} head, not a draft model: pass it as --head"
    ),
    WarningKind.METHOD_DRAFT_NEEDS_TARGET: lambda f: (
        "pass --model too: the draft's vocabulary is compared with the target's"
    ),
    WarningKind.METHOD_DRAFT_VOCAB: _draft_vocab,
    WarningKind.METHOD_NEEDS_HEAD: lambda f: f"needs {HEADS[f['head']]} head trained for the target: pass --head PATH",
    WarningKind.METHOD_NOT_A_HEAD: lambda f: (
        f"{f['name']} does not say it is a head (architecture {f['architecture']}); cannot check it"
    ),
    WarningKind.METHOD_OTHER_HEAD: lambda f: f"{f['name']} is {HEADS[f['head']]} head; use its method ({f['head']})",
    WarningKind.METHOD_HEAD_NEEDS_TARGET: lambda f: (
        "pass --model too: the head's base model and hidden size are matched against the target"
    ),
    WarningKind.METHOD_HEAD_OTHER_BASE: lambda f: (
        f"{f['name']} was trained for {f['base_model']}, the target is {f['target']}"
    ),
    WarningKind.METHOD_HEAD_MISMATCH: lambda f: (
        f"{f['name']} has {f['key']} {f['head_value']}, the target {f['target_value']}: trained for another model"
    ),
    WarningKind.METHOD_HEAD_MATCHES: _head_matches,
    WarningKind.METHOD_DSPARK_IN_TARGET: lambda f: (
        f"{f['name']}'s weights ship DSpark stages (markov_head, confidence_head)"
    ),
    WarningKind.METHOD_HEADS_NO_BASE: lambda f: (
        f"{f['name']} names no base_model_name_or_path, the model {f['engine_name']} loads under its heads"
    ),
    WarningKind.METHOD_HEADS_IN_TARGET: _heads_in_target,
    WarningKind.METHOD_HEAD_SERVED_ONLY: lambda f: (
        f"{f['engine_name']} loads {HEADS[f['head']]} head only from the served checkpoint: serve {f['name']} as "
        f"{f['model_flag']}"
    ),
    WarningKind.METHOD_HEAD_NOT_SHIPPED: lambda f: (
        f"{f['engine_name']} runs {HEADS[f['head']]} head only when the served checkpoint ships it ({f['key']}): pass "
        "it as --model"
    ),
    WarningKind.METHOD_NGRAM_BESIDE_HEADS: lambda f: (
        f"{f['name']} ships {HEADS[f['head']]} head, which {f['engine_name']}'s {f['k_flag']} uses instead: serve its "
        "base model for n-gram" + _gpu(f)
    ),
    WarningKind.METHOD_MTP_NEEDS_TARGET: lambda f: "pass --model: MTP layers are read from the target's config.json",
    WarningKind.METHOD_NO_MTP: lambda f: (
        f"{f['name']}'s config.json declares no MTP layers (num_nextn_predict_layers, mtp_num_hidden_layers)"
    ),
    WarningKind.METHOD_MTP_OTHER_FAMILY: lambda f: f"for {f['family']} models; the target is {f['model_type']}",
    WarningKind.METHOD_MTP: lambda f: f"{f['name']}: {f['layers']} MTP layer(s) ({f['key']}, {f['model_type']})",
    WarningKind.METHOD_CUSTOM_CLASS: lambda f: (
        "a proposer class of your own (model: package.module.Class); no file says what it needs"
    ),
    WarningKind.METHOD_EXTRACTS_STATES: lambda f: (
        "extracts the target's hidden states (to train a head); it drafts nothing"
    ),
    WarningKind.METHOD_NEEDS_UNKNOWN: lambda f: (
        f"speculab does not know what {f['method']} needs; see {f['engine']}'s documentation"
    ),
    WarningKind.METHOD_UNAVAILABLE: lambda f: f"{f['method']} {f['why']}",
}
