"""Seeded prompt sources: built-in sets, JSONL, ShareGPT and synthetic prompts -> a frozen `Workload`.

One entry point, `load_workload(spec, seed=..., num_prompts=..., api=...)`, parses a workload spec string:

    builtin:NAME                      a set shipped with speculab (`list_builtin()`; mixes grounded/open/mixed)
    PATH.jsonl | jsonl:PATH           one JSON object per line: prompt or messages, max_tokens, category, checks, id
    sharegpt:PATH                     ShareGPT JSON: the first human turn of each conversation
    synthetic:input=N,output=N[,...]  seeded random-word prompts of about N tokens (see `parse_synthetic`)

Determinism: the items, their order and their per-request seeds depend only on (spec, file contents, seed,
num_prompts, api). The run seed never reorders a file or a built-in set; it derives each request's sampling seed
(from (seed, index) through numpy's SeedSequence) and the text of synthetic prompts. `num_prompts` smaller than
the set takes the first items; larger cycles through the set again in the same order (item i is source item
i mod n, with its own seed). Every malformed input raises `UserError` naming the file, line and reason before any
request is sent. docs/workloads.md documents every format.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from speculab.errors import UserError
from speculab.harness.analysis.stats import describe
from speculab.harness.records import RequestSpec
from speculab.harness.workload.checks import CheckSpecError, parse_checks

APIS = ("completions", "chat")
BUILTIN_VERSION = 1  # bump when any built-in set's text changes, so old results say which prompts they used
_DATA_PACKAGE = "speculab.harness.workload.data"
_SEED_MASK = 0x7FFF_FFFF  # per-request seeds fit a signed 32-bit int: every server accepts them


@dataclass(frozen=True, slots=True)
class Workload:
    """The requests of one run, in order; identical in every arm and every repeat."""

    name: str  # short label for reports, e.g. "code-edit", "synthetic", "my_prompts"
    source: str  # human description: file path + sha256, or built-in set + version
    items: tuple[RequestSpec, ...]

    def __len__(self) -> int:
        return len(self.items)


@dataclass(frozen=True, slots=True)
class BuiltinSet:
    name: str  # use as `builtin:NAME`
    kind: str  # "grounded" (the answer reuses the prompt), "open" (open-ended), or "mix"
    count: int  # items in the set
    description: str


@dataclass(frozen=True, slots=True)
class _SourceItem:
    """One item as a source gives it, before seeding and rendering for an API."""

    prompt_id: str
    prompt: str | None = None
    messages: tuple[dict[str, Any], ...] | None = None
    max_tokens: int | None = None
    category: str | None = None
    checks: tuple[dict[str, Any], ...] = ()
    expected_output_tokens: int | None = None


# --- built-in sets ---------------------------------------------------------------------------------------------

_BUILTIN: dict[str, tuple[str, str]] = {  # name -> (kind, description); order is the interleaving order
    "code-edit": (
        "grounded",
        "a given Python function or class plus an edit (rename, add a parameter, type hints, fix)",
    ),
    "extraction": ("grounded", "a given record or passage; extract named fields as JSON"),
    "summarize": ("grounded", "a given passage of 150-300 words; summarize or rewrite it"),
    "rag-qa": ("grounded", "a few given context paragraphs and a question answered from them, quoting the source"),
    "writing": ("open", "stories, emails, descriptions and other open-ended writing"),
    "qa": ("open", "general-knowledge explanations"),
    "math": ("open", "word problems with a single numeric answer"),
}
_MIXES: dict[str, tuple[str, str]] = {
    "grounded": ("mix", "all input-grounded sets, interleaved round-robin"),
    "open": ("mix", "all open-ended sets, interleaved round-robin"),
    "mixed": ("mix", "every built-in set, grounded and open alternating, interleaved round-robin"),
}


def list_builtin() -> tuple[BuiltinSet, ...]:
    """Every built-in workload (sets, then mixes) with its kind, item count and a one-line description."""
    sets = [BuiltinSet(n, kind, len(_builtin_items(n)), desc) for n, (kind, desc) in _BUILTIN.items()]
    mixes = [BuiltinSet(n, kind, len(_mix_items(n)), desc) for n, (kind, desc) in _MIXES.items()]
    return tuple(sets + mixes)


def _builtin_text(name: str) -> str:
    return resources.files(_DATA_PACKAGE).joinpath(f"{name}.jsonl").read_text(encoding="utf-8")


def _builtin_items(name: str) -> list[_SourceItem]:
    return _parse_jsonl_text(_builtin_text(name), f"builtin:{name}")


def _mix_members(name: str) -> list[str]:
    grounded = [n for n, (k, _) in _BUILTIN.items() if k == "grounded"]
    opened = [n for n, (k, _) in _BUILTIN.items() if k == "open"]
    if name == "grounded":
        return grounded
    if name == "open":
        return opened
    # mixed: alternate grounded and open sets so any prefix of the mix holds both kinds
    order = []
    for i in range(max(len(grounded), len(opened))):
        order += grounded[i : i + 1] + opened[i : i + 1]
    return order


def _mix_items(name: str) -> list[_SourceItem]:
    return list(_round_robin([_builtin_items(m) for m in _mix_members(name)]))


def _round_robin(lists: Sequence[Sequence[_SourceItem]]) -> Iterator[_SourceItem]:
    """a0 b0 c0 a1 b1 c1 ...; a list that runs out drops out, the rest continue in order."""
    for i in range(max((len(x) for x in lists), default=0)):
        for x in lists:
            if i < len(x):
                yield x[i]


def _load_builtin(name: str) -> tuple[str, list[_SourceItem]]:
    if name in _BUILTIN:
        files = [name]
        items = _builtin_items(name)
    elif name in _MIXES:
        files = _mix_members(name)
        items = _mix_items(name)
    else:
        known = ", ".join([*_BUILTIN, *_MIXES])
        raise UserError(
            f"unknown built-in workload {name!r}; choose one of: {known} (`speculab workload` describes them)"
        )
    digest = hashlib.sha256("".join(_builtin_text(f) for f in files).encode()).hexdigest()
    return f"builtin:{name} v{BUILTIN_VERSION} (sha256 {digest})", items


# --- JSONL -----------------------------------------------------------------------------------------------------

_JSONL_KEYS = ("id", "prompt", "messages", "max_tokens", "category", "checks", "expected_output_tokens")
_ROLES = ("system", "developer", "user", "assistant", "tool")


def _load_jsonl(path_str: str) -> tuple[str, list[_SourceItem]]:
    path, raw = _read_file(path_str)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason}); save the file as UTF-8") from None
    items = _parse_jsonl_text(text, str(path))
    return f"{path} (sha256 {hashlib.sha256(raw).hexdigest()})", items


def _parse_jsonl_text(text: str, where: str) -> list[_SourceItem]:
    items = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{where}:{lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
        try:
            items.append(_item_from_obj(obj, default_id=f"line{lineno}"))
        except ValueError as e:
            raise UserError(f"{where}:{lineno}: {e}") from None
    if not items:
        raise UserError(f"{where}: no items (expected one JSON object per line with 'prompt' or 'messages')")
    return items


def _item_from_obj(obj: Any, default_id: str) -> _SourceItem:
    """Validate one JSONL object; ValueError names the key and the fix."""
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    for key in obj:
        close = difflib.get_close_matches(key, _JSONL_KEYS, n=1, cutoff=0.8)
        if key not in _JSONL_KEYS and close:  # other unknown keys (answers, metadata) are kept out silently
            raise ValueError(f"unknown key {key!r} (did you mean {close[0]!r}?)")
    has_prompt, has_messages = "prompt" in obj, "messages" in obj
    if has_prompt == has_messages:
        raise ValueError("each item needs exactly one of 'prompt' (a string) or 'messages' (a list)")
    prompt = messages = None
    if has_prompt:
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("'prompt' must be a non-empty string")
    else:
        messages = _validate_messages(obj["messages"])
    checks: tuple[dict[str, Any], ...] = ()
    if "checks" in obj:
        try:
            parse_checks(obj["checks"])
        except CheckSpecError as e:
            raise ValueError(str(e)) from None
        checks = tuple(obj["checks"])
    category = obj.get("category")
    if category is not None and (not isinstance(category, str) or not category):
        raise ValueError("'category' must be a non-empty string")
    item_id = obj.get("id", default_id)
    if not isinstance(item_id, (str, int)) or isinstance(item_id, bool):
        raise ValueError("'id' must be a string or an integer")
    return _SourceItem(
        prompt_id=str(item_id),
        prompt=prompt,
        messages=messages,
        max_tokens=_positive_int(obj, "max_tokens"),
        category=category,
        checks=checks,
        expected_output_tokens=_positive_int(obj, "expected_output_tokens"),
    )


def _positive_int(obj: dict[str, Any], key: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"'{key}' must be a positive integer, got {value!r}")
    return value


def _validate_messages(messages: Any) -> tuple[dict[str, Any], ...]:
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty list of {role, content} objects")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m or "content" not in m:
            raise ValueError(f"messages[{i}] must be an object with 'role' and 'content'")
        if m["role"] not in _ROLES:
            raise ValueError(f"messages[{i}].role must be one of {', '.join(_ROLES)}, got {m['role']!r}")
        if not isinstance(m["content"], (str, list)):
            raise ValueError(f"messages[{i}].content must be a string or a list of content parts")
    return tuple(messages)


# --- ShareGPT --------------------------------------------------------------------------------------------------

_HUMAN = ("human", "user")
_ASSISTANT = ("gpt", "assistant", "chatgpt", "bard", "bing", "model")


def _load_sharegpt(path_str: str) -> tuple[str, list[_SourceItem]]:
    """First human turn of each conversation -> prompt; the reply right after it sets max_tokens (see docs)."""
    path, raw = _read_file(path_str)
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}: not valid JSON ({e.msg} at column {e.colno})") from None
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 text ({e.reason}); ShareGPT files are JSON") from None
    if not isinstance(data, list):
        raise UserError(
            f"{path}: a ShareGPT file is a JSON list of {{'conversations': [...]}}, got {type(data).__name__}"
        )
    items, skipped = [], 0
    for i, entry in enumerate(data):
        convs = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(convs, list) or not all(isinstance(t, dict) for t in convs):
            raise UserError(f"{path}: entry {i}: needs 'conversations', a list of {{'from', 'value'}} turns")
        item = _sharegpt_item(convs, entry.get("id", f"entry{i}"))
        if item is None:
            skipped += 1
        else:
            items.append(item)
    if not items:
        raise UserError(f"{path}: no conversation has a non-empty human turn; is this a ShareGPT file?")
    digest = hashlib.sha256(raw).hexdigest()
    return f"{path} (sha256 {digest}; {len(items)} conversations used, {skipped} skipped)", items


def _sharegpt_item(turns: list[dict[str, Any]], entry_id: Any) -> _SourceItem | None:
    for k, turn in enumerate(turns):
        if turn.get("from") in _HUMAN:
            prompt = turn.get("value")
            if not isinstance(prompt, str) or not prompt.strip():
                return None
            reply = turns[k + 1] if k + 1 < len(turns) else None
            out = None
            if reply is not None and reply.get("from") in _ASSISTANT and isinstance(reply.get("value"), str):
                out = max(1, approx_tokens(reply["value"]))
            return _SourceItem(prompt_id=str(entry_id), prompt=prompt, max_tokens=out, expected_output_tokens=out)
    return None


# --- synthetic -------------------------------------------------------------------------------------------------

DISTS = ("fixed", "uniform", "normal", "lognormal")
_DEFAULT_SPREAD = 0.25  # relative spread when a non-fixed distribution is asked for without `spread`
_DEFAULT_SYNTHETIC_N = 100
_MAX_SYNTHETIC_TOKENS = 1_000_000
_TOKEN_RE = re.compile(r"\w+|[^\w\s]")


def approx_tokens(text: str) -> int:
    """Approximate token count without a tokenizer: one per word (\\w+ run) plus one per punctuation mark."""
    return len(_TOKEN_RE.findall(text))


@dataclass(frozen=True, slots=True)
class LengthDist:
    """A distribution of token lengths: `mean` tokens, `spread` relative (see `sample`)."""

    mean: int
    dist: str = "fixed"
    spread: float = 0.0

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n integer lengths >= 1. uniform: mean*(1 +- spread); normal: sd = spread*mean (clipped at 1);
        lognormal: sigma = spread, mu chosen so the mean is `mean`."""
        m, s = float(self.mean), self.spread
        if self.dist == "fixed":
            x = np.full(n, m)
        elif self.dist == "uniform":
            x = rng.uniform(m * (1 - s), m * (1 + s), n)
        elif self.dist == "normal":
            x = rng.normal(m, s * m, n)
        else:
            x = rng.lognormal(math.log(m) - s * s / 2, s, n)
        return np.clip(np.rint(x), 1, _MAX_SYNTHETIC_TOKENS).astype(np.int64)


@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    input: LengthDist
    output: LengthDist
    n: int | None  # None: as many as num_prompts asks for (or 100)
    prefix_tokens: int  # a shared prefix of this many tokens opens every prompt (for prefix-cache studies)


_SYNTH_KEYS = ("input", "output", "n", "dist", "spread", "input_dist", "output_dist", "input_spread", "output_spread")
_SYNTH_KEYS += ("prefix",)
_SYNTH_GRAMMAR = "synthetic:input=N,output=N[,n=N][,dist=fixed|uniform|normal|lognormal][,spread=F][,prefix=N]"


def parse_synthetic(arg: str) -> SyntheticSpec:
    """Parse `input=512,output=128,n=200,dist=lognormal,spread=0.5` (see docs/workloads.md for every key)."""
    kv: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in arg.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in _SYNTH_KEYS:
            raise UserError(f"synthetic workload: bad part {part!r}; expected {_SYNTH_GRAMMAR}")
        if key in kv:
            raise UserError(f"synthetic workload: {key!r} given twice")
        kv[key] = value.strip()
    for key in ("input", "output"):
        if key not in kv:
            raise UserError(f"synthetic workload needs {key}=TOKENS; expected {_SYNTH_GRAMMAR}")
    return SyntheticSpec(
        input=_length_dist(kv, "input"),
        output=_length_dist(kv, "output"),
        n=_synth_int(kv, "n", 1) if "n" in kv else None,
        prefix_tokens=_synth_int(kv, "prefix", 0) if "prefix" in kv else 0,
    )


def _length_dist(kv: dict[str, str], side: str) -> LengthDist:
    dist = kv.get(f"{side}_dist", kv.get("dist", "fixed"))
    if dist not in DISTS:
        raise UserError(f"synthetic workload: {side} distribution {dist!r} unknown; use one of {', '.join(DISTS)}")
    spread_str = kv.get(f"{side}_spread", kv.get("spread"))
    if dist == "fixed":
        if f"{side}_spread" in kv or ("spread" in kv and f"{side}_dist" not in kv):
            raise UserError(f"synthetic workload: spread has no effect on a fixed {side} length; add dist=...")
        spread = 0.0
    else:
        spread = _DEFAULT_SPREAD if spread_str is None else _synth_float(spread_str, f"{side} spread")
        if spread <= 0 or (dist == "uniform" and spread >= 1):
            raise UserError(f"synthetic workload: {side} spread must be > 0 (and < 1 for uniform), got {spread}")
    return LengthDist(mean=_synth_int(kv, side, 1), dist=dist, spread=spread)


def _synth_int(kv: dict[str, str], key: str, minimum: int) -> int:
    try:
        value = int(kv[key])
    except ValueError:
        raise UserError(f"synthetic workload: {key} must be an integer, got {kv[key]!r}") from None
    if not minimum <= value <= _MAX_SYNTHETIC_TOKENS:
        raise UserError(f"synthetic workload: {key} must be between {minimum} and {_MAX_SYNTHETIC_TOKENS}")
    return value


def _synth_float(s: str, what: str) -> float:
    try:
        value = float(s)
    except ValueError:
        raise UserError(f"synthetic workload: {what} must be a number, got {s!r}") from None
    if not math.isfinite(value):
        raise UserError(f"synthetic workload: {what} must be finite")
    return value


# Common English words, each a single token (with its leading space) in the GPT-2 and Llama vocabularies, so
# that one word ~ one token. Punctuation marks count one token each.
_WORD_TEXT = """
    the of and to in is was for on that with as by at from his her they this have had not are but be which
    one all were when we there can an their been has more if will would who so no other into time only new
    some could these two may first then do any like my now over such our man me even most made after also did
    many before must through back years where much your way well down should because each just those people
    how too little state good very make world still own see men work long get here between both life being
    under never day same another know while last might us great old year off come since against go came right
    used take three place around however home small found thought went say part once general high upon school
    every does got left number course war until always away something fact though water less public put think
    almost hand enough far took head yet government system better set told nothing night end why called
    find going look asked later point knew next program city business give group toward young days let room
    president side social given present several order national possible rather second face per among form
    important often things looked early white case kitchen become large big need four within felt along children
    saw best church ever least power development light thing seemed family interest want members mind country
    area others done turned although open doctor service certain kind problem began different door thus help sense
    means whole matter perhaps itself mountain times law human line above name example action company hands local
    show whether five history gave today either act feet across taken past quite anything seen having death
    experience body word half really field week car words already information tell together college shall money
    period held keep sure free seems real behind cannot miss political air question making office brought whose
    special heard major problems ago became federal moment study available known result street economic boy
    position reason change south board individual job areas society west close turn love community true court
    force full seem wife future age voice center woman control common policy necessary following front sometimes
    six girl clear further land run students provide am able mother felt simple story river garden morning road
    paper music market table window summer winter animal bridge stone glass field island forest letter train
"""
_WORDS = tuple(dict.fromkeys(_WORD_TEXT.split()))  # dedupe, keep order
_WORDS_ARRAY = np.array(_WORDS, dtype=object)
_PUNCT_EVERY = (6, 16)  # sentence length range in words


def _synthetic_text(rng: np.random.Generator, n_tokens: int) -> str:
    """About n_tokens tokens of varied sentences (approx_tokens(result) == n_tokens exactly)."""
    lo, hi = _PUNCT_EVERY
    # Draw every random number up front (numpy, fast); the loop below runs once per sentence, not per word.
    words = _WORDS_ARRAY[rng.integers(0, len(_WORDS), n_tokens)].tolist()
    lengths = rng.integers(lo, hi + 1, n_tokens // (lo + 1) + 2).tolist()
    sentences: list[str] = []
    budget, w = n_tokens, 0
    for k in lengths:
        if budget <= 0:
            break
        if budget <= k + 1:  # the last sentence: shorter, and without its period if only one token is left
            k = max(1, budget - 1)
        sentence = words[w : w + k]
        w += k
        sentence[0] = sentence[0].capitalize()
        used = k
        if budget - k >= 1:
            sentence[-1] += "."
            used += 1
        sentences.append(" ".join(sentence))
        budget -= used
    return " ".join(sentences)


def _load_synthetic(arg: str, seed: int, num_prompts: int | None) -> tuple[str, list[_SourceItem]]:
    spec = parse_synthetic(arg)
    n = spec.n or num_prompts or _DEFAULT_SYNTHETIC_N
    # The text stream is seeded by the run seed (a different seed gives different prompts) and kept apart from
    # the per-request sampling seeds by a fixed second word of entropy.
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5EED_7E47]))
    in_lens = spec.input.sample(rng, n)
    out_lens = spec.output.sample(rng, n)
    prefix = _synthetic_text(rng, spec.prefix_tokens) + " " if spec.prefix_tokens else ""
    items = []
    for i in range(n):
        body_tokens = max(1, int(in_lens[i]) - spec.prefix_tokens)
        out = int(out_lens[i])
        items.append(
            _SourceItem(
                prompt_id=f"synthetic-{i}",
                prompt=prefix + _synthetic_text(rng, body_tokens),
                max_tokens=out,
                category="synthetic",
                expected_output_tokens=out,
            )
        )
    return f"synthetic:{arg} (seed {seed}, {n} prompts, lengths in approximate tokens)", items


# --- entry point -----------------------------------------------------------------------------------------------


def load_workload(spec: str, *, seed: int, num_prompts: int | None = None, api: str = "completions") -> Workload:
    """Parse `spec` and return the run's requests, seeded from (seed, index). Raises UserError on bad input."""
    if api not in APIS:
        raise UserError(f"api must be one of {', '.join(APIS)}, got {api!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise UserError(f"seed must be a non-negative integer, got {seed!r}")
    if num_prompts is not None and (
        not isinstance(num_prompts, int) or isinstance(num_prompts, bool) or num_prompts < 1
    ):
        raise UserError(f"num_prompts must be a positive integer, got {num_prompts!r}")
    kind, _, arg = spec.partition(":")
    if kind == "builtin":
        name = arg
        source, items = _load_builtin(arg)
    elif kind == "jsonl":
        name, (source, items) = Path(arg).stem, _load_jsonl(arg)
    elif kind == "sharegpt":
        name, (source, items) = Path(arg).stem, _load_sharegpt(arg)
    elif kind == "synthetic":
        name, (source, items) = "synthetic", _load_synthetic(arg, seed, num_prompts)
    elif spec.endswith(".jsonl"):
        name, (source, items) = Path(spec).stem, _load_jsonl(spec)
    else:
        raise UserError(
            f"unknown workload {spec!r}; use builtin:NAME (`speculab workload` lists them), a .jsonl file, jsonl:PATH, "
            "sharegpt:PATH or synthetic:input=N,output=N"
        )
    return Workload(name=name, source=source, items=_finalize(items, seed, num_prompts, api))


def request_seed(seed: int, index: int) -> int:
    """The sampling seed of request `index` in a run seeded `seed`: stable, independent across indices."""
    return int(np.random.SeedSequence([seed, index]).generate_state(1, dtype=np.uint32)[0]) & _SEED_MASK


def _finalize(items: list[_SourceItem], seed: int, num_prompts: int | None, api: str) -> tuple[RequestSpec, ...]:
    total = len(items) if num_prompts is None else num_prompts
    out = []
    for i in range(total):
        src = items[i % len(items)]  # cycle in order when num_prompts exceeds the set
        prompt, messages = _render(src, api)
        out.append(
            RequestSpec(
                index=i,
                prompt=prompt,
                messages=messages,
                max_tokens=src.max_tokens,
                category=src.category,
                seed=request_seed(seed, i),
                checks=src.checks,
                expected_output_tokens=src.expected_output_tokens,
                prompt_id=src.prompt_id,
            )
        )
    return tuple(out)


def _render(src: _SourceItem, api: str) -> tuple[str | None, tuple[dict[str, Any], ...] | None]:
    if api == "chat":
        return None, src.messages if src.messages is not None else ({"role": "user", "content": src.prompt},)
    if src.prompt is not None:
        return src.prompt, None
    try:
        return render_messages(src.messages or ()), None
    except ValueError as e:
        raise UserError(f"item {src.prompt_id}: {e}; use --api chat for this workload") from None


def render_messages(messages: Sequence[dict[str, Any]]) -> str:
    """Messages -> one completions prompt. A lone user message is its text verbatim; otherwise each message
    becomes "Role: text" (System/User/Assistant/...), separated by blank lines, ending with "Assistant:"."""
    texts = [(m["role"], _content_text(m["content"])) for m in messages]
    if len(texts) == 1 and texts[0][0] == "user":
        return texts[0][1]
    return "\n\n".join(f"{role.capitalize()}: {text}" for role, text in texts) + "\n\nAssistant:"


def _content_text(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    parts = []
    for p in content:
        if not isinstance(p, dict) or p.get("type") != "text" or not isinstance(p.get("text"), str):
            raise ValueError("only text content parts can be rendered to a completions prompt")
        parts.append(p["text"])
    return "\n".join(parts)


def _read_file(path_str: str) -> tuple[Path, bytes]:
    if not path_str:
        raise UserError("workload path is empty; give a file path after the colon")
    path = Path(path_str).expanduser()
    try:
        return path, path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"workload file {path} not found") from None
    except IsADirectoryError:
        raise UserError(f"workload path {path} is a directory; give a file") from None
    except OSError as e:
        raise UserError(f"cannot read workload file {path}: {e.strerror}") from None


def item_text(item: RequestSpec) -> str:
    """The text a request sends: its prompt, or its messages' text parts joined (for length statistics)."""
    if item.prompt is not None:
        return item.prompt
    parts = []
    for m in item.messages or ():
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "\n".join(parts)


def workload_overview(workload: Workload) -> dict[str, Any]:
    """Counts and length distributions of a workload (lengths in approximate tokens, see `approx_tokens`)."""
    items = workload.items
    with_max = [i.max_tokens for i in items if i.max_tokens is not None]
    check_types = Counter(c.get("type") for i in items for c in i.checks)
    return {
        "name": workload.name,
        "source": workload.source,
        "items": len(items),
        "distinct_prompts": len({i.prompt_id for i in items}),
        "categories": dict(Counter(i.category or "(none)" for i in items)),
        "prompt_tokens_approx": describe(approx_tokens(item_text(i)) for i in items).to_dict(),
        "items_with_max_tokens": len(with_max),
        "max_tokens": describe(with_max).to_dict(),
        "items_with_checks": sum(1 for i in items if i.checks),
        "check_types": dict(check_types),
    }
