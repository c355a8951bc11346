"""The methods table (pure): each method an engine release declares, whether it can run here, why, and the flags it
would add to the baseline command — joined from `declared`, the checkpoint facts and the adapters.

A method's needs are told from its name (n-gram/suffix: the prompt; a draft model; an EAGLE, EAGLE-3, Medusa,
MLP-speculator, DFlash or DSpark head; the target's own MTP layers); a name none of these fits is "unknown", never
guessed. The flags are what the engine's adapter derives for the engine's own name, k included (adapters/).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from speculab.config import SpeculationConfig
from speculab.errors import UserError
from speculab.harness.servers.adapters import EngineAdapter, Served, adapter_for, plain_base
from speculab.harness.servers.adapters.base import HeadsFromTarget
from speculab.harness.servers.methods.checkpoint import CheckpointFacts, same_model
from speculab.harness.servers.methods.declared import DeclaredMethods
from speculab.harness.servers.methods.vocab import VocabMatch

TABLE_K = 4  # the k shown in the flags column; an experiment's grid sets its own
PATH = "PATH"  # stands for a path the user has not given
_TODAYS = ("ngram", "draft_model", "eagle", "eagle3", "mtp")
# what each head kind is called in a sentence, most specific name first (needs_of matches them in this order)
_HEADS = {
    "eagle3": "an EAGLE-3",
    "eagle": "an EAGLE",
    "medusa": "a Medusa",
    "mlp_speculator": "an MLP-speculator",
    "dflash": "a DFlash",
    "dspark": "a DSpark",
}


@dataclass(frozen=True, slots=True)
class Given:
    """What the user has: the target checkpoint, a draft model, a head (None: not given), the draft's vocabulary."""

    target: CheckpointFacts | None = None
    draft: CheckpointFacts | None = None
    head: CheckpointFacts | None = None
    vocab: VocabMatch | None = None  # the draft's tokenizer against the target's (both given)


@dataclass(frozen=True, slots=True)
class MethodRow:
    method: str  # the engine's own name
    available: str  # yes | no | unknown
    why: str  # one line
    flags: tuple[str, ...]  # what the candidate command adds to the baseline's
    needs: str  # prompt | draft | eagle | eagle3 | medusa | mlp_speculator | dflash | dspark | mtp | custom_class |
    # extract_hidden_states | unknown
    experiment_method: str | None  # the `speculation.method` speculab's experiments take for it, None: none yet
    path_flag: str | None = None  # "--draft" / "--head" / "--model": the path it needs that was not given
    for_family: str | None = None  # the model family a family-specific MTP method is for (`deepseek_mtp`: deepseek)


@dataclass(frozen=True, slots=True)
class MethodsTable:
    declared: DeclaredMethods
    given: Given
    rows: tuple[MethodRow, ...]
    running: Served | None = None  # what the server behind --url said it runs (speculab serve's /version); None: unsaid


def needs_of(name: str) -> str:
    """What a method needs, from its name in any engine's spelling."""
    n = name.lower().replace("-", "_")
    if "ngram" in n or "lookup" in n or n == "suffix":
        return "prompt"
    for kind in _HEADS:
        if kind in n:
            return kind
    if "mtp" in n or "nextn" in n:
        return "mtp"
    if n in ("draft_model", "standalone", "draft_simple", "draft"):
        return "draft"
    if n in ("custom_class", "extract_hidden_states"):
        return n
    return "unknown"


def experiment_method(engine: str, name: str) -> str | None:
    """speculab's experiment name for the engine's own method name (its adapter's spellings), None: not one."""
    names = adapter_for(engine).experiment_names
    if names is not None:
        return names.get(name)
    return name if name in _TODAYS else None


def _flags(engine: str, name: str, needs: str, model: str | None, k: int = TABLE_K) -> tuple[str, ...]:
    """What the candidate adds, as the engine's adapter derives it for the engine's own name (() when the adapter
    cannot: an engine speculab has no adapter for, a name whose k no flag sets)."""
    adapter = adapter_for(engine)
    path = (model or PATH) if needs == "draft" or (needs in _HEADS and not adapter.heads_from_target) else None
    lookup = {"prompt_lookup_max": 4, "prompt_lookup_min": 2} if name == "ngram" and adapter.json_config else {}
    k = adapter.fixed_k.get(name, k)
    base = plain_base(adapter)  # the plain arm of a checkpoint that ships heads (TGI's `--speculate 0`)
    try:
        return tuple(adapter.candidate_command(base, SpeculationConfig(name, k, model=path, **lookup)))
    except UserError:
        return ()


def _draft(engine: str, g: Given) -> tuple[str, str]:
    prefix_ok = adapter_for(engine).draft_vocab_prefix
    if g.draft is None:
        return "no", "needs a draft model with the target's tokenizer: pass --draft PATH"
    if g.draft.head_kind is not None:
        return "no", f"{g.draft.name} is {_HEADS[g.draft.head_kind]} head, not a draft model: pass it as --head"
    if g.target is None or g.vocab is None:
        return "unknown", "pass --model too: the draft's vocabulary is compared with the target's"
    v = g.vocab
    if v.kind == "identical":
        return "yes", f"{g.draft.name}: identical vocabulary ({v.draft_tokens} tokens)"
    if v.kind == "prefix":
        if prefix_ok is not None:
            return "yes", f"{v.why} ({prefix_ok})"
        return "unknown", f"{v.why}; an engine that needs equal vocabularies refuses it"
    if v.kind == "mapping":
        return "no", f"{v.why}, which {engine} does not apply"
    return ("no" if v.kind == "different" else "unknown"), v.why


def _head(needs: str, g: Given) -> tuple[str, str]:
    h, t = g.head, g.target
    if h is None:
        return "no", f"needs {_HEADS[needs]} head trained for the target: pass --head PATH"
    if h.head_kind is None:
        return "unknown", f"{h.name} does not say it is a head (architecture {h.architecture}); cannot check it"
    if h.head_kind != needs:
        return "no", f"{h.name} is {_HEADS[h.head_kind]} head; use its method ({h.head_kind})"
    if t is None:
        return "unknown", "pass --model too: the head's base model and hidden size are matched against the target"
    if h.base_model and not same_model(h.base_model, t):
        return "no", f"{h.name} was trained for {h.base_model}, the target is {t.name_or_path or t.name}"
    if h.hidden_size and t.hidden_size and h.hidden_size != t.hidden_size:
        return "no", f"{h.name} has hidden_size {h.hidden_size}, the target {t.hidden_size}: trained for another model"
    if h.vocab_size and t.vocab_size and h.vocab_size != t.vocab_size and not h.draft_vocab_size:
        return "no", f"{h.name} has vocab_size {h.vocab_size}, the target {t.vocab_size}: trained for another model"
    base = f"base model {h.base_model}" if h.base_model else "no base model named"
    most = f"; drafts at most {h.heads} ({h.heads_key})" if h.heads else ""
    return "yes", f"{h.name} matches the target (hidden_size {h.hidden_size}, {base}){most}"


def _dspark(g: Given) -> tuple[str, str]:
    """DSpark: a separate draft (--head), or stages the target's own weights ship (vLLM then drafts with the target)."""
    if g.head is None and g.target is not None and g.target.dspark_stages:
        return "yes", f"{g.target.name}'s weights ship DSpark stages (markov_head, confidence_head)"
    return _head("dspark", g)


def _head_in_target(adapter: EngineAdapter, kind: str, g: Given) -> tuple[str, str]:
    """An engine that loads heads only from the checkpoint it serves (`heads_from_target`: TGI's Medusa heads or MLP
    speculator), whose config.json names the base model it loads under them; its k may not exceed the heads it ships."""
    rule, t, h = adapter.heads_from_target, g.target, g.head
    assert rule is not None
    if t is not None and t.head_kind == kind:
        if not t.base_model:
            return "no", f"{t.name} names no base_model_name_or_path, the model {rule.name} loads under its heads"
        most = f"{rule.k_flag} at most {t.heads} ({t.heads_key})" if t.heads else f"{rule.k_flag} N"
        plain = " ".join(plain_base(adapter))
        return "yes", f"{t.name} ships {_HEADS[kind]} head for {t.base_model}: {most}; the baseline needs {plain}"
    if h is not None and h.head_kind == kind:
        where = f"serve {h.name} as {rule.model_flag}"
        return "no", f"{rule.name} loads {_HEADS[kind]} head only from the served checkpoint: {where}"
    key = "medusa_num_heads" if kind == "medusa" else "model_type mlp_speculator"  # what the checkpoint says
    return (
        "no",
        f"{rule.name} runs {_HEADS[kind]} head only when the served checkpoint ships it ({key}): pass it as --model",
    )


def _ngram_beside_heads(g: Given, rule: HeadsFromTarget) -> tuple[str, str]:
    """n-gram on an engine whose one speculation flag runs a served checkpoint's heads instead, where it ships any."""
    t = g.target
    if t is not None and t.head_kind in rule.methods:
        why = f"{t.name} ships {_HEADS[t.head_kind]} head, which {rule.name}'s {rule.k_flag} uses instead"
        return "no", f"{why}: serve its base model for n-gram"
    return "yes", _PROMPT_WHY


def _family(name: str) -> str | None:
    """`deepseek_mtp` -> `deepseek`: the model family a family-specific MTP method is for (None: any family)."""
    # vLLM spells them lowercase; SGLang's uppercase names (FROZEN_KV_MTP) are algorithms, not families
    m = re.fullmatch(r"([a-z0-9_]+?)_mtp", name)
    return m.group(1) if m else None


def _mtp(name: str, g: Given) -> tuple[str, str]:
    t = g.target
    if t is None:
        return "unknown", "pass --model: MTP layers are read from the target's config.json"
    if not t.mtp_layers:
        return "no", f"{t.name}'s config.json declares no MTP layers (num_nextn_predict_layers, mtp_num_hidden_layers)"
    family = _family(name)
    if family and not (t.model_type or "").lower().startswith(family):
        return "no", f"for {family} models; the target is {t.model_type}"
    return "yes", f"{t.name}: {t.mtp_layers} MTP layer(s) ({t.mtp_key}, {t.model_type})"


_PROMPT_WHY = "drafts from the prompt and the output so far: needs no other model"


def _row(engine: str, name: str, g: Given, unavailable: str | None = None) -> MethodRow:
    needs = needs_of(name)
    adapter = adapter_for(engine)
    rule = adapter.heads_from_target  # TGI's: the heads its one flag runs from the served checkpoint itself
    from_target = rule is not None
    heads = rule.methods if rule is not None else frozenset()
    if needs == "prompt":
        available, why = _ngram_beside_heads(g, rule) if rule is not None else ("yes", _PROMPT_WHY)
        if "gpu" in name.lower():  # vLLM's ngram_gpu: the same lookup, run on the accelerator
            why += " (a GPU implementation)"
    elif needs == "draft":
        available, why = _draft(engine, g)
    elif from_target and needs in heads:
        available, why = _head_in_target(adapter, needs, g)
    elif needs == "dspark":
        available, why = _dspark(g)
    elif needs in _HEADS:
        available, why = _head(needs, g)
    elif needs == "mtp":
        available, why = _mtp(name, g)
    elif needs == "custom_class":
        available, why = (
            "unknown",
            "a proposer class of your own (model: package.module.Class); no file says what it needs",
        )
    elif needs == "extract_hidden_states":
        available, why = "no", "extracts the target's hidden states (to train a head); it drafts nothing"
    else:
        available, why = "unknown", f"speculab does not know what {name} needs; see {engine}'s documentation"
    if unavailable is not None and available != "no":  # the release declares it; this install cannot start it
        available, why = "no", f"{name} {unavailable}"
    model = g.draft.path if needs == "draft" and g.draft else g.head.path if needs in _HEADS and g.head else None
    path_flag = {"draft": "--draft"}.get(needs, ("--model" if from_target else "--head") if needs in _HEADS else None)
    if from_target and needs in _HEADS:
        model = g.target.path if g.target is not None and g.target.head_kind == needs else None
    missing = path_flag if path_flag and model is None else None
    k = TABLE_K
    if from_target and model is not None and g.target is not None and g.target.heads:
        k = min(k, g.target.heads)  # it refuses more than the heads the checkpoint ships
    flags = _flags(engine, name, needs, model, k)
    family = _family(name) if needs == "mtp" else None
    return MethodRow(name, available, why, flags, needs, experiment_method(engine, name), missing, family)


def methods_table(declared: DeclaredMethods, given: Given) -> MethodsTable:
    """One row per declared method, in the engine's order."""
    rows = (_row(declared.engine, m, given, declared.unavailable.get(m)) for m in declared.methods)
    return MethodsTable(declared, given, tuple(rows))
