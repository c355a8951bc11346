"""Synthetic workloads: seeded random-word prompts of about N tokens, `synthetic:input=N,output=N[,...]`.

Lengths are approximate tokens (`approx_tokens`); the words are single tokens in common vocabularies, so the
server's count is close to ours. See `parse_synthetic` for every key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from speculab.errors import UserError
from speculab.harness.workload.items import SourceItem

DISTS = ("fixed", "uniform", "normal", "lognormal")
_DEFAULT_SPREAD = 0.25  # relative spread when a non-fixed distribution is asked for without `spread`
_DEFAULT_SYNTHETIC_N = 100
_MAX_SYNTHETIC_TOKENS = 1_000_000


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


def synthetic_text(rng: np.random.Generator, n_tokens: int) -> str:
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


def load_synthetic(arg: str, seed: int, num_prompts: int | None) -> tuple[str, list[SourceItem]]:
    spec = parse_synthetic(arg)
    n = spec.n or num_prompts or _DEFAULT_SYNTHETIC_N
    # The text stream is seeded by the run seed (a different seed gives different prompts) and kept apart from
    # the per-request sampling seeds by a fixed second word of entropy.
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5EED_7E47]))
    in_lens = spec.input.sample(rng, n)
    out_lens = spec.output.sample(rng, n)
    prefix = synthetic_text(rng, spec.prefix_tokens) + " " if spec.prefix_tokens else ""
    items = []
    for i in range(n):
        body_tokens = max(1, int(in_lens[i]) - spec.prefix_tokens)
        out = int(out_lens[i])
        items.append(
            SourceItem(
                prompt_id=f"synthetic-{i}",
                prompt=prefix + synthetic_text(rng, body_tokens),
                max_tokens=out,
                category="synthetic",
                expected_output_tokens=out,
                synthesised=True,
            )
        )
    return f"synthetic:{arg} (seed {seed}, {n} prompts, lengths in approximate tokens)", items
