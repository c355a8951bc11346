"""Hugging Face tokenizers (tokenizer.json) plus tokenizer_config.json: special tokens and the chat template.

Also the incremental detokenizer that streaming needs: text is released only once it is stable, so a client
never sees a broken UTF-8 sequence, and all streamed pieces concatenate to exactly the full decode.
"""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from jinja2 import TemplateError, nodes
from jinja2.exceptions import TemplateSyntaxError
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer as HFTokenizer

from speculab.engine.token_bound import min_tokens, token_bound
from speculab.errors import UserError

REPLACEMENT_CHAR = "\ufffd"
_BYTE_TOKEN = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")  # sentencepiece byte-fallback pieces


class TokenizerError(UserError):
    """The tokenizer files are missing or unusable."""


class ChatTemplateError(UserError):
    """No chat template, or the template rejected the messages (raise_exception) or failed to render."""


def _token_content(value: Any) -> str | None:
    """tokenizer_config.json stores special tokens as a string or as {"content": ...} (AddedToken)."""
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TokenizerError(f"{path} is not valid JSON ({e}); fix or re-download it") from None
    return data if isinstance(data, dict) else {}


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [v for v in value if isinstance(v, int)]


def _raise_exception(message: str) -> None:
    raise ChatTemplateError(f"chat template rejected the messages: {message}")


def _strftime_now(fmt: str) -> str:
    """HF exposes this to templates (Llama 3.x stamps today's date into the system prompt)."""
    return datetime.datetime.now().strftime(fmt)


class _GenerationBlock(Extension):
    """`{% generation %}...{% endgeneration %}` marks assistant text for HF's training masks; render its body."""

    tags = {"generation"}  # noqa: RUF012 - jinja2's Extension API declares tags as a class attribute

    def parse(self, parser: Any) -> list[nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


class Tokenizer:
    """Encode/decode with a `tokenizers` model, with HF's special-token and chat-template conventions."""

    def __init__(self, tok: HFTokenizer, config: dict[str, Any], eos_token_ids: Iterable[int] = ()):
        # A tokenizer.json may carry truncation or padding settings: a prompt must never be cut silently.
        tok.no_truncation()
        tok.no_padding()
        self._tok = tok
        self.config = config
        self.bos_token = _token_content(config.get("bos_token"))
        self.eos_token = _token_content(config.get("eos_token"))
        self.bos_token_id: int | None = tok.token_to_id(self.bos_token) if self.bos_token else None
        eos = set(eos_token_ids)
        if self.eos_token and tok.token_to_id(self.eos_token) is not None:
            eos.add(tok.token_to_id(self.eos_token))
        self.eos_token_ids: frozenset[int] = frozenset(eos)
        # None = leave it to the tokenizer.json post-processor; True/False = HF's add_bos_token override.
        self._add_bos: bool | None = config.get("add_bos_token")
        self._add_eos: bool | None = config.get("add_eos_token")
        self.chat_template: str | None = self._pick_template(config.get("chat_template"))
        self._compiled_template: Any = None
        self._token_text_cache: dict[int, str] = {}
        self.byte_token_ids: frozenset[int] = frozenset(
            i for t, i in tok.get_vocab(with_added_tokens=False).items() if _BYTE_TOKEN.match(t)
        )
        self.special_token_ids: frozenset[int] = frozenset(
            i for i, t in tok.get_added_tokens_decoder().items() if t.special
        )
        context = tok.encode("a", add_special_tokens=False).ids
        self._context_ids: list[int] = context[-1:]  # a plain token to decode others after (see token_text)
        self._bound = token_bound(tok)

    @property
    def max_bytes_per_token(self) -> int | None:
        """The most bytes of (normalized) text one token covers; None when this pipeline has no such bound."""
        return self._bound.max_bytes_per_token

    def min_tokens(self, text: str) -> int:
        """A cheap lower bound on len(encode(text)) (token_bound.py); 0 when none is known."""
        return min_tokens(self._tok, self._bound, text)

    @classmethod
    def from_dir(cls, path: str | Path) -> Tokenizer:
        """tokenizer.json + tokenizer_config.json (+ generation_config.json, config.json for eos ids)."""
        root = Path(path)
        tok_file = root / "tokenizer.json"
        if not tok_file.is_file():
            raise TokenizerError(
                f"{root} has no tokenizer.json; speculab needs a fast-tokenizer file (save one with "
                "transformers: AutoTokenizer.from_pretrained(dir).save_pretrained(dir))"
            )
        try:
            tok = HFTokenizer.from_file(str(tok_file))
        except Exception as e:  # tokenizers raises a bare Exception on malformed files
            raise TokenizerError(f"cannot read {tok_file}: {e}") from None
        config = _read_json(root / "tokenizer_config.json")
        template_file = root / "chat_template.jinja"
        if not config.get("chat_template") and template_file.is_file():
            config["chat_template"] = template_file.read_text(encoding="utf-8")
        eos: set[int] = set()
        for name in ("generation_config.json", "config.json"):
            eos.update(_ids(_read_json(root / name).get("eos_token_id")))
        return cls(tok, config, eos)

    @staticmethod
    def _pick_template(value: Any) -> str | None:
        # Newer configs may hold a list of named templates; "default" is the chat one.
        if isinstance(value, list):
            named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
            return named.get("default") or next(iter(named.values()), None)
        return value if isinstance(value, str) and value else None

    @property
    def vocab_size(self) -> int:
        """Number of token ids including added tokens (the model's embedding may be larger)."""
        return self._tok.get_vocab_size(with_added_tokens=True)

    def _encode(self, text: str, add_special_tokens: bool) -> list[int]:
        # encode_batch releases the GIL while it works (encode does not): a long prompt tokenized in a worker
        # thread then stalls neither the event loop nor the engine thread.
        return self._tok.encode_batch([text], add_special_tokens=add_special_tokens)[0].ids

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        """Token ids; with add_special_tokens, BOS/EOS as the post-processor and add_bos/eos_token say."""
        ids = self._encode(text, add_special_tokens)
        if not add_special_tokens or (self._add_bos is None and self._add_eos is None):
            return ids
        # An explicit add_bos_token/add_eos_token in tokenizer_config.json overrides the post-processor, as HF does.
        ids = list(ids)
        bos = self.bos_token_id
        eos = self._tok.token_to_id(self.eos_token) if self.eos_token else None
        plain = self._encode(text, False)
        if bos is not None and self._add_bos is not None:
            has = bool(ids) and ids[0] == bos and not (plain and plain[0] == bos)
            if self._add_bos and not has:
                ids.insert(0, bos)
            elif not self._add_bos and has:
                ids.pop(0)
        if eos is not None and self._add_eos is not None:
            has = bool(ids) and ids[-1] == eos and not (plain and plain[-1] == eos)
            if self._add_eos and not has:
                ids.append(eos)
            elif not self._add_eos and has:
                ids.pop()
        return ids

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_text(self, token_id: int) -> str:
        """The text one token contributes, leading space included (for logprobs); special tokens verbatim.

        Decoding a token alone loses sentencepiece's leading space, so it is decoded after a plain context
        token and the context's text removed. A token that is part of a multi-byte character shows U+FFFD.
        """
        cached = self._token_text_cache.get(token_id)
        if cached is not None:
            return cached
        ctx = self._context_ids
        prefix = self._tok.decode(ctx, skip_special_tokens=False)
        both = self._tok.decode([*ctx, token_id], skip_special_tokens=False)
        text = (
            both[len(prefix) :] if both.startswith(prefix) else self._tok.decode([token_id], skip_special_tokens=False)
        )
        self._token_text_cache[token_id] = text
        return text

    def apply_chat_template(self, messages: Sequence[dict[str, Any]], *, add_generation_prompt: bool = True) -> str:
        """Render the chat template to text. Encode the result with add_special_tokens=False: templates add BOS."""
        if self.chat_template is None:
            raise ChatTemplateError(
                "this model has no chat template (tokenizer_config.json has no chat_template); "
                "use /v1/completions or a model with a chat template"
            )
        if self._compiled_template is None:
            env = ImmutableSandboxedEnvironment(
                trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols", _GenerationBlock]
            )
            env.globals["raise_exception"] = _raise_exception
            env.globals["strftime_now"] = _strftime_now
            env.filters["tojson"] = lambda v, indent=None: json.dumps(v, ensure_ascii=False, indent=indent)
            try:
                self._compiled_template = env.from_string(self.chat_template)
            except TemplateSyntaxError as e:
                raise ChatTemplateError(f"the model's chat template does not parse: {e}") from None
        try:
            return self._compiled_template.render(
                messages=list(messages),
                add_generation_prompt=add_generation_prompt,
                bos_token=self.bos_token or "",
                eos_token=self.eos_token or "",
            )
        except ChatTemplateError:
            raise
        except TemplateError as e:
            raise ChatTemplateError(f"the model's chat template failed to render: {e}") from None


class IncrementalDetokenizer:
    """Turns a stream of token ids into a stream of stable text pieces.

    Each push decodes a small window: from `prefix` (a few tokens already emitted, as context so that
    sentencepiece leading spaces and byte-level merges come out right) to the end. The text beyond the
    window's already-emitted part is released unless it ends in U+FFFD, which means an incomplete UTF-8
    sequence whose remaining bytes are still to come. A window only ever starts where a previous decode
    ended cleanly, so window decodes compose: all pieces + flush() == decode(all ids).
    """

    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int] = (), *, skip_special_tokens: bool = True):
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._ids: list[int] = list(prompt_ids)
        # Up to 5 prompt tokens give the first generated token its context (e.g. its leading space).
        self._prefix = max(len(self._ids) - 5, 0)  # window start
        self._read = len(self._ids)  # ids before this are emitted (or are prompt)
        # Skipped special tokens vanish before decoding, so they do not end a byte-fallback run either.
        self._run_ids = tokenizer.byte_token_ids | (tokenizer.special_token_ids if skip_special_tokens else frozenset())

    @property
    def ids(self) -> list[int]:
        return list(self._ids)

    def _decode(self, start: int, end: int | None = None) -> str:
        return self._tok.decode(self._ids[start:end], skip_special_tokens=self._skip)

    def push(self, ids: Iterable[int]) -> str:
        """Add generated ids; return the newly stable text (possibly "")."""
        self._ids.extend(ids)
        # A run of byte-fallback tokens decodes as a unit (an invalid run turns wholly into U+FFFD, even its
        # valid head), so text is only stable up to the start of a trailing run of them.
        end = len(self._ids)
        while end > self._read and self._ids[end - 1] in self._run_ids:
            end -= 1
        if end == self._read:
            return ""
        emitted = self._decode(self._prefix, self._read)
        text = self._decode(self._prefix, end)
        if len(text) <= len(emitted) or text.endswith(REPLACEMENT_CHAR) or not text.startswith(emitted):
            return ""
        self._prefix, self._read = self._read, end
        return text[len(emitted) :]

    def flush(self) -> str:
        """Release whatever is held back (end of generation): trailing U+FFFD stays as decode() shows it."""
        emitted = self._decode(self._prefix, self._read)
        text = self._decode(self._prefix)
        self._prefix, self._read = self._read, len(self._ids)
        return text[len(emitted) :] if text.startswith(emitted) else text
