"""A cheap, sound lower bound on how many tokens a text encodes to, so a prompt that cannot fit is refused
before the tokenizer spends seconds on it (a 1 MB prompt takes about 3 s to encode on a small CPU).

Soundness argument. Let M be the largest UTF-8 length of any vocabulary or added token string. In a pipeline
that never drops text and never fuses an unbounded run into one token, every token of the encoding covers a
piece of the *normalized* text at most M bytes long:
- byte-level BPE (GPT-2, Llama 3, Qwen2): a token of L characters stands for exactly L bytes (one character
  per byte), so for these vocabulary strings M counts characters;
- sentencepiece-style BPE (Llama 2, Mistral): token strings are literal normalized text ("▁the" covers " the",
  4 bytes of text, 6 bytes of token); a byte-fallback token "<0x41>" covers 1 byte;
- an added (special) token covers its content, unless it strips neighbouring whitespace (lstrip/rstrip),
  which is unbounded; such tokenizers get no bound.
So tokens >= ceil(bytes(normalized text) / M); special tokens the post-processor adds only add to it. Normalizers
that never shrink text (Prepend, Replace of a string by a string at least as long) leave bytes(text) as a
bound; any other normalizer (NFC: "e" + U+0301, 3 bytes, becomes "é", 2 bytes) is applied first, which costs
one linear pass. A pre-tokenizer that drops text (Whitespace, WhitespaceSplit, Bert, Split with "Removed"), a
model that maps an unknown run to one token (BPE fuse_unk without byte fallback, WordPiece, WordLevel), or
any component not listed here makes the bound unknown (None): the request-size limit is then what bounds work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tokenizers import Tokenizer as HFTokenizer

_KEEPING_PRE_TOKENIZERS = {"ByteLevel", "Metaspace", "Digits", "UnicodeScripts", "FixedLength"}
_SPLITTING_PRE_TOKENIZERS = {"Split", "Punctuation"}  # keep text unless behavior is "Removed"


@dataclass(frozen=True, slots=True)
class TokenBound:
    """`max_bytes_per_token` None = no sound bound; `normalize_first` = measure the normalized text."""

    max_bytes_per_token: int | None
    normalize_first: bool = False


def utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _keeps_text(pre: dict[str, Any] | None) -> bool:
    if pre is None:
        return True
    kind = pre.get("type")
    if kind == "Sequence":
        return all(_keeps_text(p) for p in pre.get("pretokenizers") or [])
    if kind in _SPLITTING_PRE_TOKENIZERS:
        return pre.get("behavior") != "Removed"
    return kind in _KEEPING_PRE_TOKENIZERS


def _byte_level(pre: dict[str, Any] | None) -> bool:
    if pre is None:
        return False
    if pre.get("type") == "Sequence":
        return any(_byte_level(p) for p in pre.get("pretokenizers") or [])
    return pre.get("type") == "ByteLevel"


def _never_shrinks(norm: dict[str, Any] | None) -> bool:
    if norm is None:
        return True
    kind = norm.get("type")
    if kind == "Sequence":
        return all(_never_shrinks(n) for n in norm.get("normalizers") or [])
    if kind == "Prepend":
        return True
    if kind == "Replace":
        pattern = (norm.get("pattern") or {}).get("String")
        return isinstance(pattern, str) and utf8_len(norm.get("content") or "") >= utf8_len(pattern)
    return False


def _bounded_model(model: dict[str, Any]) -> bool:
    """Whether one token of this model covers at most its own string (no fused or whole-word unknowns)."""
    if model.get("type") != "BPE":
        return False
    return not (model.get("unk_token") is not None and model.get("fuse_unk") and not model.get("byte_fallback"))


def token_bound(tok: HFTokenizer) -> TokenBound:
    """Analyse a tokenizer's pipeline (see the module docstring)."""
    spec = json.loads(tok.to_str())
    added = spec.get("added_tokens") or []
    if not _keeps_text(spec.get("pre_tokenizer")) or not _bounded_model(spec.get("model") or {}):
        return TokenBound(None)
    if any(a.get("lstrip") or a.get("rstrip") for a in added):
        return TokenBound(None)
    normalize_first = not _never_shrinks(spec.get("normalizer"))
    vocab_len = len if _byte_level(spec.get("pre_tokenizer")) else utf8_len  # byte-level: one character per byte
    longest = max((vocab_len(s) for s in tok.get_vocab(with_added_tokens=False)), default=1)
    contents = [a.get("content") or "" for a in added]
    if normalize_first and tok.normalizer is not None:  # an added token's content may normalize to something longer
        contents += [tok.normalizer.normalize_str(c) for c in contents]
    longest = max([longest, *(utf8_len(c) for c in contents)])
    return TokenBound(max(longest, 1), normalize_first)


def min_tokens(tok: HFTokenizer, bound: TokenBound, text: str) -> int:
    """A lower bound on len(tok.encode(text)); 0 when the pipeline allows none."""
    m = bound.max_bytes_per_token
    if m is None:
        return 0
    if bound.normalize_first and tok.normalizer is not None:
        text = tok.normalizer.normalize_str(text)
    return -(-utf8_len(text) // m)
