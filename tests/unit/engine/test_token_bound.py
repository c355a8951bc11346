"""The cheap token-count lower bound is sound (never above the real count) and absent where it cannot be."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.fakes.tiny_checkpoint import train_sentencepiece_style_tokenizer, train_tokenizer
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import models, normalizers, pre_tokenizers

from speculab.engine.tokenizer import Tokenizer

DEMO = Path(__file__).parents[3] / "src" / "speculab" / "engine" / "assets" / "demo" / "target"

PIECES = [
    "a",
    "b",
    " ",
    "  ",
    "\n",
    "the ",
    "é",
    "e\u0301",
    "你好",
    "😀",
    "<|bos|>",
    "<|im_start|>",
    "#" * 70,
    "x" * 40,
]
texts = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=8)), max_size=40).map("".join)


def _nfc(tok: HFTokenizer) -> HFTokenizer:
    tok.normalizer = normalizers.NFC()  # Qwen2's normalizer: it can shrink text ("e" + U+0301 -> "é")
    return tok


TOKENIZERS = {
    "byte-level": lambda: Tokenizer(train_tokenizer(), {}),
    "sentencepiece": lambda: Tokenizer(train_sentencepiece_style_tokenizer(), {}),
    "byte-level-nfc": lambda: Tokenizer(_nfc(train_tokenizer()), {}),
    "demo": lambda: Tokenizer.from_dir(DEMO),
}


@pytest.fixture(scope="module", params=list(TOKENIZERS))
def tok(request):
    return TOKENIZERS[request.param]()


@settings(max_examples=150, deadline=None, derandomize=True)
@given(text=texts)
def test_the_bound_never_exceeds_the_token_count(tok, text):
    assert tok.max_bytes_per_token is not None
    assert tok.min_tokens(text) <= len(tok.encode(text, add_special_tokens=False))


def test_the_bound_is_tight_enough_to_refuse_a_huge_prompt_unread():
    tok = Tokenizer.from_dir(DEMO)
    assert tok.max_bytes_per_token == 64  # its longest token is 64 '#' (one byte per byte-level character)
    assert tok.min_tokens("a" * 10_000_000) == 156_250  # far over any context, known without tokenizing


def test_nfc_is_applied_before_measuring():
    tok = TOKENIZERS["byte-level-nfc"]()
    assert tok._bound.normalize_first
    text = "e\u0301" * 1000  # 3000 bytes as sent, 2000 once composed
    assert tok.min_tokens(text) == -(-2000 // tok.max_bytes_per_token) <= len(tok.encode(text))


def _wordlevel() -> HFTokenizer:
    tok = HFTokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return tok


def _whitespace_pre_tokenizer() -> HFTokenizer:
    tok = train_tokenizer()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


def _lstrip_special() -> HFTokenizer:
    from tokenizers import AddedToken

    tok = train_tokenizer()
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True)])
    return tok


@pytest.mark.parametrize(
    "make",
    [
        _wordlevel,  # an unknown word of any length is one token
        _whitespace_pre_tokenizer,  # drops spaces
        _lstrip_special,  # <mask> swallows the whitespace before it
    ],
    ids=["wordlevel", "whitespace-pre-tokenizer", "lstrip-added-token"],
)
def test_pipelines_that_can_drop_or_fuse_text_get_no_bound(make):
    tok = Tokenizer(make(), {})
    assert tok.max_bytes_per_token is None and tok.min_tokens(" " * 10_000) == 0


def test_truncation_in_tokenizer_json_never_cuts_a_prompt():
    hf = train_tokenizer()
    hf.enable_truncation(4)
    assert len(Tokenizer(hf, {}).encode("the quick brown fox jumps over the lazy dog")) > 4
