"""Does a draft model speak the target's vocabulary? tokenizer.json (or vocab.json) compared token by token.

identical: the same token -> id map (embedding tables may still be padded to different sizes, as Qwen2's are);
prefix: the same ids on the shared part and one adds at most a few tokens at the end (llama.cpp accepts up to 128);
mapping: most tokens are shared but under other ids (a draft needs its ids translated: no engine here does it);
different: the vocabularies do not overlap enough to map; unknown: a side has no tokenizer file we can read.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from speculab.errors import UserError
from speculab.harness.servers.methods.checkpoint import read_json_file

PREFIX_MAX_EXTRA = 128  # llama.cpp's SPEC_VOCAB_MAX_SIZE_DIFFERENCE (common/speculative.cpp)
MAPPING_MIN_SHARED = 0.9  # share of the draft's tokens that must exist in the target for a mapping to be useful
MAX_TOKENIZER_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class VocabMatch:
    """The draft's vocabulary against the target's, in numbers (report/words/methods.vocab_words says it)."""

    kind: str  # identical | prefix | mapping | different | unknown
    target_tokens: int | None  # None: that side has no tokenizer file read here
    draft_tokens: int | None
    shared: int | None  # draft tokens (by text) the target also has
    same_id: int | None  # of those, how many under the same id

    def to_fields(self) -> dict[str, Any]:
        """The numbers a methods-table reason carries (`METHOD_DRAFT_VOCAB`'s `vocab`)."""
        return {
            "kind": self.kind,
            "target_tokens": self.target_tokens,
            "draft_tokens": self.draft_tokens,
            "shared": self.shared,
            "same_id": self.same_id,
        }


def read_vocab(path: Path) -> dict[str, int] | None:
    """token -> id from a checkpoint's tokenizer.json (model vocab plus added tokens) or vocab.json; None without
    either (a sentencepiece tokenizer.model is not read here). A broken file is one UserError naming it."""
    for name in ("tokenizer.json", "vocab.json"):
        f = path / name
        if not f.is_file():
            continue
        data = read_json_file(f, MAX_TOKENIZER_BYTES, "a tokenizer file")
        if name == "vocab.json":
            return {str(k): v for k, v in data.items() if isinstance(v, int)} if isinstance(data, dict) else None
        return _tokenizer_json_vocab(data, f)
    return None


def _tokenizer_json_vocab(data: object, f: Path) -> dict[str, int]:
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(model, dict):
        raise UserError(f"{f} has no `model` object; is it a Hugging Face tokenizer.json?")
    raw = model.get("vocab") or {}
    vocab: dict[str, int] = {}
    if isinstance(raw, dict):  # BPE, WordPiece, WordLevel: token -> id
        vocab = {str(k): v for k, v in raw.items() if isinstance(v, int)}
    elif isinstance(raw, list):  # Unigram: [[token, score], ...], the id is the position
        vocab = {str(e[0]): i for i, e in enumerate(raw) if isinstance(e, list) and e}
    for tok in data.get("added_tokens") or []:  # type: ignore[union-attr]
        if isinstance(tok, dict) and isinstance(tok.get("content"), str) and isinstance(tok.get("id"), int):
            vocab[tok["content"]] = tok["id"]
    return vocab


def compare_vocab(target: dict[str, int] | None, draft: dict[str, int] | None) -> VocabMatch:
    """How the draft's vocabulary relates to the target's (pure)."""
    if target is None or draft is None:
        return VocabMatch("unknown", _n(target), _n(draft), None, None)
    if target == draft:
        return VocabMatch("identical", len(target), len(draft), len(draft), len(draft))
    shared = [t for t in draft if t in target]
    same_id = sum(1 for t in shared if target[t] == draft[t])
    nt, nd = len(target), len(draft)
    small, large = (draft, target) if nd <= nt else (target, draft)
    if all(large.get(t) == i for t, i in small.items()) and len(large) - len(small) <= PREFIX_MAX_EXTRA:
        return VocabMatch("prefix", nt, nd, len(shared), same_id)
    if nd and len(shared) / nd >= MAPPING_MIN_SHARED:
        return VocabMatch("mapping", nt, nd, len(shared), same_id)
    return VocabMatch("different", nt, nd, len(shared), same_id)


def _n(v: dict[str, int] | None) -> int | None:
    return None if v is None else len(v)


def vocab_match(target_dir: Path | str, draft_dir: Path | str) -> VocabMatch:
    """Read both checkpoints' tokenizers and compare them."""
    return compare_vocab(read_vocab(Path(target_dir)), read_vocab(Path(draft_dir)))
