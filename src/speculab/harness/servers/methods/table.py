"""The methods table (pure): each method an engine release declares, whether it can run here, why, and the flags it
would add to the baseline command — joined from `declared`, the checkpoint facts and the adapters.

A method's needs are told from its name (n-gram/suffix: the prompt; a draft model; an EAGLE, EAGLE-3, Medusa,
MLP-speculator, DFlash or DSpark head; the target's own MTP layers); a name none of these fits is "unknown", never
guessed. The flags are what the engine's adapter derives for the engine's own name, k included (adapters/).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from speculab.config import SpeculationConfig
from speculab.errors import UserError
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.servers.adapters import EngineAdapter, Served, adapter_for, plain_base
from speculab.harness.servers.adapters.base import HeadsFromTarget
from speculab.harness.servers.methods.checkpoint import CheckpointFacts, same_model
from speculab.harness.servers.methods.declared import DeclaredMethods
from speculab.harness.servers.methods.vocab import VocabMatch

TABLE_K = 4  # the k shown in the flags column; an experiment's grid sets its own
PATH = "PATH"  # stands for a path the user has not given
_TODAYS = ("ngram", "draft_model", "eagle", "eagle3", "mtp")
# the head kinds, most specific name first (needs_of matches them in this order; report/words/methods names them)
_HEADS = ("eagle3", "eagle", "medusa", "mlp_speculator", "dflash", "dspark")
Kind = WarningKind


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
    why: ReportWarning  # a METHOD_* record: the facts it rests on; the report words it in one line
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


def _why(kind: WarningKind, **fields: Any) -> ReportWarning:
    """A row's reason as a record: its kind and the checkpoints' facts it names (the report words it)."""
    return ReportWarning(kind, fields=fields)


def _draft(engine: str, g: Given) -> tuple[str, ReportWarning]:
    if g.draft is None:
        return "no", _why(Kind.METHOD_NEEDS_DRAFT)
    if g.draft.head_kind is not None:
        return "no", _why(Kind.METHOD_DRAFT_IS_HEAD, name=g.draft.name, head=g.draft.head_kind)
    if g.target is None or g.vocab is None:
        return "unknown", _why(Kind.METHOD_DRAFT_NEEDS_TARGET)
    v = g.vocab
    accepts = adapter_for(engine).draft_vocab_prefix  # the engine's own rule for a vocabulary that extends the other
    why = _why(Kind.METHOD_DRAFT_VOCAB, name=g.draft.name, engine=engine, accepts=accepts, vocab=v.to_fields())
    if v.kind == "identical" or (v.kind == "prefix" and accepts is not None):
        return "yes", why
    if v.kind in ("prefix", "unknown"):
        return "unknown", why
    return "no", why  # mapping (no engine here translates ids), different


def _head(needs: str, g: Given) -> tuple[str, ReportWarning]:
    h, t = g.head, g.target
    if h is None:
        return "no", _why(Kind.METHOD_NEEDS_HEAD, head=needs)
    if h.head_kind is None:
        return "unknown", _why(Kind.METHOD_NOT_A_HEAD, name=h.name, architecture=h.architecture)
    if h.head_kind != needs:
        return "no", _why(Kind.METHOD_OTHER_HEAD, name=h.name, head=h.head_kind)
    if t is None:
        return "unknown", _why(Kind.METHOD_HEAD_NEEDS_TARGET)
    if h.base_model and not same_model(h.base_model, t):
        return "no", _why(
            Kind.METHOD_HEAD_OTHER_BASE, name=h.name, base_model=h.base_model, target=t.name_or_path or t.name
        )
    if h.hidden_size and t.hidden_size and h.hidden_size != t.hidden_size:
        size = {"key": "hidden_size", "head_value": h.hidden_size, "target_value": t.hidden_size}
        return "no", _why(Kind.METHOD_HEAD_MISMATCH, name=h.name, **size)
    if h.vocab_size and t.vocab_size and h.vocab_size != t.vocab_size and not h.draft_vocab_size:
        size = {"key": "vocab_size", "head_value": h.vocab_size, "target_value": t.vocab_size}
        return "no", _why(Kind.METHOD_HEAD_MISMATCH, name=h.name, **size)
    matches = {"name": h.name, "hidden_size": h.hidden_size, "base_model": h.base_model}
    return "yes", _why(Kind.METHOD_HEAD_MATCHES, **matches, heads=h.heads, heads_key=h.heads_key)


def _dspark(g: Given) -> tuple[str, ReportWarning]:
    """DSpark: a separate draft (--head), or stages the target's own weights ship (vLLM then drafts with the target)."""
    if g.head is None and g.target is not None and g.target.dspark_stages:
        return "yes", _why(Kind.METHOD_DSPARK_IN_TARGET, name=g.target.name)
    return _head("dspark", g)


def _head_in_target(adapter: EngineAdapter, kind: str, g: Given) -> tuple[str, ReportWarning]:
    """An engine that loads heads only from the checkpoint it serves (`heads_from_target`: TGI's Medusa heads or MLP
    speculator), whose config.json names the base model it loads under them; its k may not exceed the heads it ships."""
    rule, t, h = adapter.heads_from_target, g.target, g.head
    assert rule is not None
    if t is not None and t.head_kind == kind:
        if not t.base_model:
            return "no", _why(Kind.METHOD_HEADS_NO_BASE, name=t.name, engine_name=rule.name)
        plain = " ".join(plain_base(adapter))
        shipped = {"name": t.name, "head": kind, "base_model": t.base_model, "k_flag": rule.k_flag}
        return "yes", _why(Kind.METHOD_HEADS_IN_TARGET, **shipped, heads=t.heads, heads_key=t.heads_key, plain=plain)
    if h is not None and h.head_kind == kind:
        served = {"engine_name": rule.name, "head": kind, "name": h.name, "model_flag": rule.model_flag}
        return "no", _why(Kind.METHOD_HEAD_SERVED_ONLY, **served)
    key = "medusa_num_heads" if kind == "medusa" else "model_type mlp_speculator"  # what the checkpoint says
    return "no", _why(Kind.METHOD_HEAD_NOT_SHIPPED, engine_name=rule.name, head=kind, key=key)


def _prompt(g: Given, rule: HeadsFromTarget | None, gpu: bool) -> tuple[str, ReportWarning]:
    """n-gram and its kin draft from the prompt; but not on an engine whose one speculation flag runs a served
    checkpoint's heads instead, where it ships any. `gpu`: the same lookup run on the accelerator (vLLM's ngram_gpu)."""
    t = g.target
    if rule is not None and t is not None and t.head_kind in rule.methods:
        beside = {"name": t.name, "head": t.head_kind, "engine_name": rule.name, "k_flag": rule.k_flag}
        return "no", _why(Kind.METHOD_NGRAM_BESIDE_HEADS, **beside, gpu=gpu)
    return "yes", _why(Kind.METHOD_FROM_PROMPT, gpu=gpu)


def _family(name: str) -> str | None:
    """`deepseek_mtp` -> `deepseek`: the model family a family-specific MTP method is for (None: any family)."""
    # vLLM spells them lowercase; SGLang's uppercase names (FROZEN_KV_MTP) are algorithms, not families
    m = re.fullmatch(r"([a-z0-9_]+?)_mtp", name)
    return m.group(1) if m else None


def _mtp(name: str, g: Given) -> tuple[str, ReportWarning]:
    t = g.target
    if t is None:
        return "unknown", _why(Kind.METHOD_MTP_NEEDS_TARGET)
    if not t.mtp_layers:
        return "no", _why(Kind.METHOD_NO_MTP, name=t.name)
    family = _family(name)
    if family and not (t.model_type or "").lower().startswith(family):
        return "no", _why(Kind.METHOD_MTP_OTHER_FAMILY, family=family, model_type=t.model_type)
    return "yes", _why(Kind.METHOD_MTP, name=t.name, layers=t.mtp_layers, key=t.mtp_key, model_type=t.model_type)


def _row(engine: str, name: str, g: Given, unavailable: str | None = None) -> MethodRow:
    needs = needs_of(name)
    adapter = adapter_for(engine)
    rule = adapter.heads_from_target  # TGI's: the heads its one flag runs from the served checkpoint itself
    from_target = rule is not None
    heads = rule.methods if rule is not None else frozenset()
    if needs == "prompt":
        available, why = _prompt(g, rule, "gpu" in name.lower())
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
    elif needs == "custom_class":  # a proposer class of the user's own: no file says what it needs
        available, why = "unknown", _why(Kind.METHOD_CUSTOM_CLASS)
    elif needs == "extract_hidden_states":
        available, why = "no", _why(Kind.METHOD_EXTRACTS_STATES)
    else:
        available, why = "unknown", _why(Kind.METHOD_NEEDS_UNKNOWN, method=name, engine=engine)
    if unavailable is not None and available != "no":  # the release declares it; this install cannot start it
        available, why = "no", _why(Kind.METHOD_UNAVAILABLE, method=name, why=unavailable)
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
