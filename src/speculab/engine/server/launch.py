"""`speculab serve`: load a model directory, build the engine and the app, run uvicorn, say when ready."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from types import FrameType
from typing import Any

import psutil
import torch
import uvicorn
from fastapi import FastAPI

from speculab.engine.async_engine import AsyncEngine
from speculab.engine.engine import Engine, EngineConfig, SpeculationHook
from speculab.engine.loader import default_dtype, load_model, parse_dtype, read_config, resolve_model_path
from speculab.engine.model import ModelConfig
from speculab.engine.server.app import DEFAULT_MAX_HEADER_BYTES, DEFAULT_MAX_REQUEST_BYTES, AppConfig, create_app
from speculab.engine.server.connection import DEFAULT_REQUEST_RECEIVE_TIMEOUT_S, uvicorn_config
from speculab.engine.speculative.config import build_speculator, parse_spec_config
from speculab.engine.speculative.forced import FLAG as FORCED_FLAG
from speculab.engine.speculative.forced import ForcedAcceptance, check_forced_rates
from speculab.engine.speculative.metrics import SpecDecodeCollector
from speculab.engine.speculative.speculator import Speculator
from speculab.engine.tokenizer import IncrementalDetokenizer, Tokenizer
from speculab.errors import UserError
from speculab.serving.exhaustion import (
    ConnectionCollector,
    ConnectionCounters,
    bound_logs,
    raise_open_files_limit,
)

DEFAULT_MAX_MODEL_LEN = 4096  # cap on the default context, so the per-slot KV cache stays modest


@dataclass(frozen=True, slots=True)
class ServeConfig:
    model: str  # a model directory, or a shipped model name ("demo")
    host: str = "127.0.0.1"
    port: int = 8000
    max_num_seqs: int = 8
    max_model_len: int | None = None  # default: the model's positions, at most DEFAULT_MAX_MODEL_LEN
    max_num_batched_tokens: int | None = None  # default: default_token_budget(device), at least max_num_seqs
    max_waiting: int = 256
    dtype: str | None = None  # auto: float32 on CPU, bfloat16 on CUDA
    device: str = "auto"
    api_key: str | None = None
    served_model_name: str | None = None  # default: the name given on the command line
    seed: int = 0
    speculative_config: str | None = None  # --speculative-config JSON (docs/speculative.md)
    # --forced-acceptance-rates: per-position unconditional rates the accept decisions are drawn to (a cost probe)
    forced_acceptance_rates: tuple[float, ...] | None = None
    threads: int | None = None  # torch CPU threads (intra-op); None: torch's default (one per physical core)
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES  # 413 past it, before the body is read
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES  # 431 past it
    max_prompt_tokens: int | None = None  # 400 past it; default: the context minus one
    metrics_public: bool = True  # /metrics without the API key (--metrics-private requires it)
    request_receive_timeout_s: float = DEFAULT_REQUEST_RECEIVE_TIMEOUT_S  # request line + headers + body; 0: none

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise UserError(f"--port {self.port} is not a TCP port; use 1-65535")
        if self.max_num_seqs < 1:
            raise UserError("--max-num-seqs must be at least 1")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise UserError("--max-model-len must be at least 2")
        if self.max_waiting < 0:
            raise UserError("--max-waiting must be >= 0")
        if self.threads is not None and self.threads < 1:
            raise UserError(f"--threads must be at least 1, got {self.threads}")
        for flag, value in (
            ("--max-request-bytes", self.max_request_bytes),
            ("--max-header-bytes", self.max_header_bytes),
        ):
            if value < 1024:
                raise UserError(f"{flag} must be at least 1024, got {value}")
        if not self.request_receive_timeout_s >= 0:  # NaN too
            raise UserError(
                f"--request-receive-timeout must be >= 0 seconds (0: none), got {self.request_receive_timeout_s}"
            )
        if self.max_prompt_tokens is not None and self.max_prompt_tokens < 1:
            raise UserError(f"--max-prompt-tokens must be at least 1, got {self.max_prompt_tokens}")
        if self.speculative_config is not None:  # a malformed config or missing draft fails before any load
            spec = parse_spec_config(self.speculative_config)
            if spec.model is not None:
                resolve_model_path(spec.model)
        if self.forced_acceptance_rates is not None:
            if self.speculative_config is None:
                raise UserError(
                    f"{FORCED_FLAG} forces which drafts are accepted, so it needs --speculative-config (e.g. "
                    '\'{"method":"ngram","num_speculative_tokens":4}\')'
                )
            k = parse_spec_config(self.speculative_config).num_speculative_tokens
            check_forced_rates(self.forced_acceptance_rates, k)


def default_token_budget(device: torch.device) -> int:
    """Per-step token budget: a step that prefills B tokens stalls every running decode for that long.

    On a CPU, 2048 prompt tokens of even a small model take hundreds of milliseconds; 512 keeps the stall
    near a few decode steps at the cost of prefilling long prompts over more steps.
    """
    return 512 if device.type == "cpu" else 2048


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise UserError(f"unknown device {name!r}; use auto, cpu or cuda[:N]") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise UserError("--device cuda but this torch has no CUDA device; use --device cpu")
    return dev


def build_engine(cfg: ServeConfig, speculator: SpeculationHook | None = None) -> tuple[AsyncEngine, Tokenizer, str]:
    """Load weights and tokenizer; returns the threaded engine, the tokenizer and the served model name.

    Settings are checked against the model's config and the free memory before any weights are read.
    """
    path = resolve_model_path(cfg.model)
    device = pick_device(cfg.device)
    if cfg.threads is not None:
        # On a machine shared with the load generator (the demo, a laptop), torch's default of one thread per
        # core makes its OpenMP workers spin against the client for the same cores (docs/engine.md).
        torch.set_num_threads(cfg.threads)
    dtype = parse_dtype(cfg.dtype) or default_dtype(device)
    mcfg = read_config(path)
    n_pos = mcfg.max_position_embeddings
    max_len = cfg.max_model_len or min(n_pos, DEFAULT_MAX_MODEL_LEN)
    if max_len > n_pos:
        raise UserError(f"--max-model-len {max_len} exceeds the model's {n_pos} positions; use at most {n_pos}")
    ecfg = EngineConfig(
        max_num_seqs=cfg.max_num_seqs,
        max_model_len=max_len,
        max_num_batched_tokens=cfg.max_num_batched_tokens or max(default_token_budget(device), cfg.max_num_seqs),
        max_waiting=cfg.max_waiting,
        seed=cfg.seed,
    )
    try:
        ecfg.scheduler_config()
    except ValueError as e:
        raise UserError(f"invalid engine settings: {e} (see speculab serve --help)") from None
    check_memory(mcfg, ecfg, dtype, device)
    model = load_model(path, dtype=dtype, device=device)
    tok = Tokenizer.from_dir(path)
    eos = set(tok.eos_token_ids) | _ids(model.config.eos_token_id)
    if speculator is None and cfg.speculative_config is not None:
        speculator = build_speculator(
            parse_spec_config(cfg.speculative_config),
            target=model,
            target_dir=path,
            num_slots=ecfg.max_num_seqs,
            max_len=ecfg.max_model_len,
            forced=None
            if cfg.forced_acceptance_rates is None
            else ForcedAcceptance(cfg.forced_acceptance_rates, seed=cfg.seed),
        )
    engine = Engine(
        model,
        ecfg,
        eos_token_ids=eos,
        detokenizer_factory=lambda ids: IncrementalDetokenizer(tok, ids),
        speculator=speculator,
    )
    name = cfg.served_model_name or (cfg.model if not Path(cfg.model).exists() else Path(cfg.model).name)
    return AsyncEngine(engine), tok, name


def kv_cache_bytes(mcfg: ModelConfig, ecfg: EngineConfig, dtype: torch.dtype) -> int:
    """Bytes of the preallocated cache: keys and values, [L, slots, Hkv, max_len + 1, D]."""
    elem = torch.empty((), dtype=dtype).element_size()
    per_pos = mcfg.num_hidden_layers * mcfg.num_key_value_heads * mcfg.head_dim * elem * 2
    return per_pos * ecfg.max_num_seqs * (ecfg.max_model_len + 1)


def check_memory(mcfg: ModelConfig, ecfg: EngineConfig, dtype: torch.dtype, device: torch.device) -> None:
    """Refuse settings whose weights + KV cache cannot fit, with the numbers and the flags to change."""
    elem = torch.empty((), dtype=dtype).element_size()
    weights, kv = mcfg.num_parameters * elem, kv_cache_bytes(mcfg, ecfg, dtype)
    free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else psutil.virtual_memory().available
    if weights + kv > 0.9 * free:
        gib = 1024**3
        raise UserError(
            f"weights ({weights / gib:.2f} GiB) + KV cache for {ecfg.max_num_seqs} sequences x {ecfg.max_model_len} "
            f"tokens ({kv / gib:.2f} GiB) exceed the {free / gib:.2f} GiB free on {device}; "
            "lower --max-num-seqs or --max-model-len"
        )


def _ids(v: int | list[int] | None) -> set[int]:
    return set() if v is None else ({v} if isinstance(v, int) else set(v))


def make_app(
    cfg: ServeConfig, speculator: SpeculationHook | None = None, counters: ConnectionCounters | None = None
) -> FastAPI:
    """The app for `cfg`; `counters` (the connection layer's) join /metrics."""
    engine, tok, name = build_engine(cfg, speculator)
    spec = engine.engine.speculator
    collectors: list[Any] = []
    if isinstance(spec, Speculator):
        collectors.append(SpecDecodeCollector(spec.counters, name, forced=spec.forced is not None))
    if counters is not None:
        collectors.append(ConnectionCollector(counters, name))
    app_cfg = AppConfig(
        served_model_name=name,
        api_key=cfg.api_key,
        max_request_bytes=cfg.max_request_bytes,
        max_header_bytes=cfg.max_header_bytes,
        max_prompt_tokens=cfg.max_prompt_tokens,
        metrics_public=cfg.metrics_public,
        server_args=served_args(cfg, engine.engine),
        model_root=str(resolve_model_path(cfg.model).resolve()),
    )
    return create_app(engine, tok, app_cfg, collectors=collectors)


# Not said to clients: where it listens (two servers compared differ in it by necessity), the name it answers to, and
# the API key (a secret).
_UNSAID = frozenset({"host", "port", "served_model_name", "api_key"})


def served_args(cfg: ServeConfig, engine: Engine) -> dict[str, Any]:
    """What this server runs, as /version says it (`server_args`): each flag's value in effect, defaults resolved
    (the context, token budget, dtype and device it chose), the speculative config as its keys with their defaults
    (null: plain decoding)."""
    p = next(engine.model.parameters())
    args = {f.name: getattr(cfg, f.name) for f in fields(ServeConfig) if f.name not in _UNSAID}
    args |= {
        "max_model_len": engine.cfg.max_model_len,
        "max_num_batched_tokens": engine.cfg.max_num_batched_tokens,
        "dtype": str(p.dtype).removeprefix("torch."),
        "device": str(p.device),
    }
    if cfg.speculative_config is not None:
        args["speculative_config"] = parse_spec_config(cfg.speculative_config).to_json()
    elif engine.speculator is None:
        args["speculative_config"] = None  # plain decoding; a speculator passed in from code is not said (unknown)
    else:
        del args["speculative_config"]
    return args


class _Server(uvicorn.Server):
    """On Ctrl-C / SIGTERM, end in-flight generations at once (an error event, then [DONE]) so that
    uvicorn's graceful shutdown does not wait on, then cancel, long streams."""

    def __init__(self, config: uvicorn.Config, engine: AsyncEngine):
        super().__init__(config)
        self.engine = engine

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.engine.begin_shutdown()
        super().handle_exit(sig, frame)


def _check_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            raise UserError(f"cannot listen on {host}:{port} ({e.strerror}); pick another --port or --host") from None


def serve(
    cfg: ServeConfig, on_ready: Callable[[str, int | None], None], speculator: SpeculationHook | None = None
) -> None:
    """Block serving HTTP until interrupted; `on_ready(url, open_files_limit)` runs once /health answers."""
    _check_port_free(cfg.host, cfg.port)
    counters = ConnectionCounters()
    app = make_app(cfg, speculator, counters)
    open_files = raise_open_files_limit()  # each connection holds one; past the limit accept() fails
    bound_logs(counters)  # after make_app: the engine's loggers exist by then
    # Ctrl-C: stop accepting, give in-flight streams a few seconds, then close them (their slots go with the engine).
    ucfg = uvicorn_config(
        app,
        host=cfg.host,
        port=cfg.port,
        max_header_bytes=cfg.max_header_bytes,
        request_receive_timeout_s=cfg.request_receive_timeout_s,
        counters=counters,
        timeout_graceful_shutdown=5,
    )
    server = _Server(ucfg, app.state.engine)
    host = f"[{cfg.host}]" if ":" in cfg.host else cfg.host
    url = f"http://{'127.0.0.1' if cfg.host == '0.0.0.0' else host}:{cfg.port}"

    def announce() -> None:
        while not server.should_exit:
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as r:
                    if r.status == 200:
                        on_ready(url, open_files)
                        return
            except OSError:
                time.sleep(0.05)

    threading.Thread(target=announce, name="speculab-ready", daemon=True).start()
    server.run()
