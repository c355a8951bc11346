"""Tokenizer matches transformers on the same files; streaming detokenization is exact and UTF-8-safe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.fakes.tiny_checkpoint import CHAT_TEMPLATE, train_sentencepiece_style_tokenizer

from speculab.engine.tokenizer import ChatTemplateError, IncrementalDetokenizer, Tokenizer, TokenizerError
from speculab.errors import UserError

TEXTS = [
    "hello world",
    "  leading spaces and trailing  ",
    "café naïve 😀 🎉 👨‍👩‍👧 日本語 你好，世界",
    "line one\nline two\n\n\ttabbed",
    "<|im_start|>user literal specials<|im_end|>",
    "",
]
CONVERSATION = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "hi 😀"},
    {"role": "assistant", "content": "hello"},
    {"role": "user", "content": "what is 2+2?"},
]


@pytest.fixture(scope="module")
def tok(tiny_checkpoint: Path) -> Tokenizer:
    return Tokenizer.from_dir(tiny_checkpoint)


@pytest.fixture(scope="module")
def hf_tok(tiny_checkpoint: Path):
    transformers = pytest.importorskip("transformers")
    return transformers.AutoTokenizer.from_pretrained(tiny_checkpoint)


@pytest.fixture(scope="module")
def sp_tok() -> Tokenizer:
    """Sentencepiece-style (Llama-2/Mistral shape): '▁' spaces, stripped first space, byte fallback."""
    return Tokenizer(train_sentencepiece_style_tokenizer(), {"bos_token": "<s>", "eos_token": "</s>"})


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("special", [True, False])
def test_encode_decode_match_transformers(tok: Tokenizer, hf_tok, text: str, special: bool):
    ids = tok.encode(text, add_special_tokens=special)
    assert ids == hf_tok.encode(text, add_special_tokens=special)
    assert (ids[:1] == [tok.bos_token_id]) == special
    for skip in (True, False):
        assert tok.decode(ids, skip_special_tokens=skip) == hf_tok.decode(ids, skip_special_tokens=skip)
    assert tok.decode(ids) == text.replace("<|im_start|>", "").replace("<|im_end|>", "")


def test_special_token_ids(tok: Tokenizer, hf_tok):
    assert tok.bos_token_id == hf_tok.bos_token_id == 0
    # <|eos|> from tokenizer_config/config.json, <|im_end|> from generation_config.json
    assert tok.eos_token_ids == {hf_tok.convert_tokens_to_ids("<|eos|>"), hf_tok.convert_tokens_to_ids("<|im_end|>")}
    assert tok.vocab_size == len(hf_tok)


@pytest.mark.parametrize("gen_prompt", [True, False])
def test_chat_template_matches_transformers(tok: Tokenizer, hf_tok, gen_prompt: bool):
    ours = tok.apply_chat_template(CONVERSATION, add_generation_prompt=gen_prompt)
    assert ours == hf_tok.apply_chat_template(CONVERSATION, tokenize=False, add_generation_prompt=gen_prompt)
    assert ours.startswith("<|bos|><|im_start|>system\nbe brief<|im_end|>\n")
    assert ours.endswith("<|im_start|>assistant\n") == gen_prompt
    # Templates carry BOS themselves, so chat prompts are encoded without adding special tokens.
    ids = tok.encode(ours, add_special_tokens=False)
    assert ids.count(tok.bos_token_id) == 1


def test_chat_template_raise_exception_is_a_user_error(tok: Tokenizer):
    with pytest.raises(ChatTemplateError, match="unknown role: robot"):
        tok.apply_chat_template([{"role": "robot", "content": "x"}])


def test_chat_template_is_sandboxed(tok: Tokenizer):
    evil = Tokenizer(tok._tok, {"chat_template": "{{ messages.__class__.__mro__[1].__subclasses__() }}"})
    with pytest.raises(ChatTemplateError, match="failed to render"):
        evil.apply_chat_template([{"role": "user", "content": "x"}])


def test_no_chat_template(tok: Tokenizer):
    bare = Tokenizer(tok._tok, {"bos_token": "<|bos|>"})
    with pytest.raises(ChatTemplateError, match="no chat template") as e:
        bare.apply_chat_template([{"role": "user", "content": "hi"}])
    assert isinstance(e.value, UserError)


def test_chat_template_from_jinja_file(tmp_path: Path, tiny_checkpoint: Path):
    for name in ("tokenizer.json", "config.json", "generation_config.json"):
        (tmp_path / name).write_bytes((tiny_checkpoint / name).read_bytes())
    cfg = json.loads((tiny_checkpoint / "tokenizer_config.json").read_text())
    del cfg["chat_template"]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(cfg))
    (tmp_path / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    t = Tokenizer.from_dir(tmp_path)
    assert t.apply_chat_template([{"role": "user", "content": "x"}]).endswith("<|im_start|>assistant\n")


def test_named_template_list_uses_default(tok: Tokenizer):
    t = Tokenizer(
        tok._tok, {"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]}
    )
    assert t.apply_chat_template([]) == "D"


def test_add_bos_token_overrides_post_processor(tok: Tokenizer):
    no_bos = Tokenizer(tok._tok, {"bos_token": "<|bos|>", "add_bos_token": False})
    assert no_bos.encode("hello") == tok.encode("hello", add_special_tokens=False)
    with_eos = Tokenizer(tok._tok, {"bos_token": "<|bos|>", "eos_token": "<|eos|>", "add_eos_token": True})
    assert with_eos.encode("hello") == [*tok.encode("hello"), tok._tok.token_to_id("<|eos|>")]


def test_missing_tokenizer_json(tmp_path: Path):
    with pytest.raises(TokenizerError, match=r"no tokenizer\.json"):
        Tokenizer.from_dir(tmp_path)


def test_token_text_keeps_leading_spaces(tok: Tokenizer, sp_tok: Tokenizer):
    for t in (tok, sp_tok):
        ids = t.encode("the quick brown fox", add_special_tokens=False)
        assert "".join(t.token_text(i) for i in ids).strip() == "the quick brown fox"
        assert any(t.token_text(i).startswith(" ") for i in ids)
    assert tok.token_text(tok.bos_token_id) == "<|bos|>"


def _stream(tok: Tokenizer, ids: list[int], cuts: list[int], prompt: list[int] = (), skip: bool = True) -> list[str]:
    detok = IncrementalDetokenizer(tok, prompt, skip_special_tokens=skip)
    pieces, start = [], 0
    for cut in [*sorted(cuts), len(ids)]:
        pieces.append(detok.push(ids[start:cut]))
        start = cut
    pieces.append(detok.flush())
    return pieces


def _check_stream(tok: Tokenizer, ids: list[int], cuts: list[int], skip: bool) -> None:
    pieces = _stream(tok, ids, cuts, skip=skip)
    assert "".join(pieces) == tok.decode(ids, skip_special_tokens=skip)
    # Nothing but the final flush may end in a half character.
    assert not any(p.endswith("\ufffd") for p in pieces[:-1])


cut_lists = st.lists(st.integers(0, 60), max_size=20)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), skip=st.booleans())
def test_stream_of_random_ids_concatenates_to_decode(tok: Tokenizer, sp_tok: Tokenizer, data, skip: bool):
    for t in (tok, sp_tok):
        ids = data.draw(st.lists(st.integers(0, t.vocab_size - 1), max_size=60))
        cuts = [c for c in data.draw(cut_lists) if c <= len(ids)]
        _check_stream(t, ids, cuts, skip)


# Text heavy in multi-byte characters: byte-level BPE and byte fallback split them across tokens.
multibyte_text = st.text(
    alphabet=st.sampled_from(list("ab é世界你好😀🎉🚀👍🏽\u200d\n")) | st.characters(codec="utf-8"), max_size=40
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=multibyte_text, data=st.data())
def test_stream_of_real_text_never_breaks_characters(tok: Tokenizer, sp_tok: Tokenizer, text: str, data):
    for t in (tok, sp_tok):
        ids = t.encode(text, add_special_tokens=False)
        cuts = [c for c in data.draw(cut_lists) if c <= len(ids)]
        pieces = _stream(t, ids, cuts)
        assert "".join(pieces) == t.decode(ids)
        assert "\ufffd" not in "".join(pieces) or "\ufffd" in text  # valid text never shows a replacement char


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prompt=st.text(max_size=20), completion=multibyte_text, data=st.data())
def test_stream_after_a_prompt_gives_only_the_completion(tok: Tokenizer, sp_tok: Tokenizer, prompt, completion, data):
    for t in (tok, sp_tok):
        prompt_ids = t.encode(prompt)
        gen = t.encode(completion, add_special_tokens=False)
        full, before = t.decode(prompt_ids + gen), t.decode(prompt_ids)
        cuts = [c for c in data.draw(cut_lists) if c <= len(gen)]
        streamed = "".join(_stream(t, gen, cuts, prompt=prompt_ids))
        assert full.startswith(before)
        assert streamed == full[len(before) :]


def test_emoji_is_held_until_complete(tok: Tokenizer):
    ids = tok.encode("😀", add_special_tokens=False)
    assert len(ids) > 1  # the byte-level BPE splits it
    detok = IncrementalDetokenizer(tok)
    assert [detok.push([i]) for i in ids] == [""] * (len(ids) - 1) + ["😀"]
    assert detok.flush() == ""


def test_sentencepiece_leading_space_survives_streaming(sp_tok: Tokenizer):
    ids = sp_tok.encode("hello world again", add_special_tokens=False)
    detok = IncrementalDetokenizer(sp_tok, sp_tok.encode("say:"))
    assert "".join(detok.push([i]) for i in ids) + detok.flush() == " hello world again"


def test_template_features_real_templates_use_match_transformers(tok: Tokenizer, hf_tok):
    """loop controls, tojson (non-ASCII kept), strftime_now, {% generation %}, undefined `tools`."""
    template = (
        "{{ bos_token }}{% if tools is defined and tools %}TOOLS{% endif %}"
        "{% for m in messages %}{% if loop.index > 3 %}{% break %}{% endif %}"
        "{% if m['role'] == 'assistant' %}{% generation %}[{{ m['content'] }}]{% endgeneration %}"
        "{% else %}{{ m['content'] | tojson }}{% endif %}{% endfor %}"
        "|{{ strftime_now('%Y') }}|{{ eos_token }}"
    )
    ours = Tokenizer(tok._tok, {**tok.config, "chat_template": template}).apply_chat_template(CONVERSATION)
    assert ours == hf_tok.apply_chat_template(CONVERSATION, chat_template=template, tokenize=False)
    assert '"hi 😀"' in ours and "[hello]" in ours and "what is" not in ours
