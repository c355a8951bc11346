"""Run the engine server in-process on a free 127.0.0.1 port, with a tiny random model and a character tokenizer."""

from __future__ import annotations

import contextlib
import string
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from tests.fakes.engine_fakes import tiny_model

from speculab.engine.async_engine import AsyncEngine
from speculab.engine.engine import Engine, EngineConfig
from speculab.engine.server.app import DEFAULT_MAX_HEADER_BYTES, AppConfig, create_app
from speculab.engine.server.connection import uvicorn_config
from speculab.harness.servers.process import free_port

ALPHABET = " " + string.ascii_lowercase + string.digits + ".,!?\n:"  # ids 2.. ; 0 = bos, 1 = eos


class CharTokenizer:
    """One token per character (unknown characters become '?'); 0 = <bos>, 1 = <eos>."""

    eos_token_ids = frozenset({1})
    bos_token_id = 0

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        ids = [2 + (ALPHABET.index(c) if c in ALPHABET else ALPHABET.index("?")) for c in text.lower()]
        return [0, *ids] if add_special_tokens else ids

    def min_tokens(self, text: str) -> int:
        return len(text)  # exactly one token per character (and BOS)

    def decode(self, ids: list[int]) -> str:
        return "".join(self.token_text(i) for i in ids if i > 1)

    def token_text(self, token_id: int) -> str:
        if token_id < 2:
            return ["<bos>", "<eos>"][token_id]
        return ALPHABET[(token_id - 2) % len(ALPHABET)]

    def apply_chat_template(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool = True) -> str:
        text = "".join(f"{m['role']}: {m['content']}\n" for m in messages)
        return text + ("assistant: " if add_generation_prompt else "")


class CharDetok:
    def __init__(self, tok: CharTokenizer, prompt_ids: list[int]):
        self.tok = tok

    def push(self, ids: list[int]) -> str:
        return self.tok.decode(ids)

    def flush(self) -> str:
        return ""


@dataclass
class Server:
    url: str
    engine: Engine
    async_engine: AsyncEngine
    model_name: str = "tiny"
    tokenizer: Any = None

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()


@contextlib.contextmanager
def running_server(
    api_key: str | None = None,
    model_dir: Path | None = None,
    app_kw: dict[str, Any] | None = None,
    **engine_kw: Any,
) -> Iterator[Server]:
    """A server on the tiny random model with the character tokenizer, or on a real checkpoint directory.

    `app_kw` goes to AppConfig (limits, metrics_public); uvicorn runs with the settings `speculab serve` uses.
    """
    engine_kw.setdefault("max_num_seqs", 4)
    engine_kw.setdefault("max_model_len", 128)
    engine_kw.setdefault("max_num_batched_tokens", 256)
    if model_dir is None:
        tok: Any = CharTokenizer()
        model = tiny_model()
        detok: Any = lambda ids: CharDetok(tok, ids)  # noqa: E731
    else:
        from speculab.engine.loader import load_model
        from speculab.engine.tokenizer import IncrementalDetokenizer, Tokenizer

        tok, model = Tokenizer.from_dir(model_dir), load_model(model_dir)
        detok = lambda ids: IncrementalDetokenizer(tok, ids)  # noqa: E731
    engine = Engine(model, EngineConfig(**engine_kw), eos_token_ids=tok.eos_token_ids, detokenizer_factory=detok)
    aeng = AsyncEngine(engine)
    cfg = AppConfig(served_model_name="tiny", api_key=api_key, **(app_kw or {}))
    app = create_app(aeng, tok, cfg)
    with serve_app(app, max_header_bytes=cfg.max_header_bytes) as url:
        yield Server(url, engine, aeng, tokenizer=tok)


@contextlib.contextmanager
def serve_app(app: Any, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES) -> Iterator[str]:
    """Run an ASGI app with uvicorn in a thread on 127.0.0.1 (free port) until /health answers; yields its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn_config(app, host="127.0.0.1", port=port, max_header_bytes=max_header_bytes))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                break
        except OSError:
            time.sleep(0.05)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def wait_for(cond, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return cond()
