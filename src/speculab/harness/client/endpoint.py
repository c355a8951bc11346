"""Where and how requests go: the endpoint (`EndpointConfig`), the run's sampling (`RequestSampling`), and the JSON
body built from them and one `RequestSpec`. The API key comes from the flag or the environment and is never written
to disk.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from speculab.errors import UserError
from speculab.harness.client.response import ResponseReader, read_nothing
from speculab.harness.records import (
    RequestSpec,
)

ApiKind = Literal["completions", "chat"]
Clock = Callable[[], float]
TokenCounter = Callable[[str], int]  # text -> number of tokens (a local tokenizer)

API_KEY_ENV = ("SPECULAB_API_KEY", "OPENAI_API_KEY")
_PATHS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


def resolve_api_key(flag_value: str | None) -> str | None:
    """The API key from the flag, else $SPECULAB_API_KEY, else $OPENAI_API_KEY. Never written to disk."""
    if flag_value:
        return flag_value
    for name in API_KEY_ENV:
        if os.environ.get(name):
            return os.environ[name]
    return None


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """Where and how to send requests. `api_key` is kept out of repr and out of `to_manifest()`."""

    base_url: str
    model: str
    api: ApiKind = "completions"
    stream: bool = True
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 600.0  # per request, connect to last byte
    include_usage: bool = True  # stream_options.include_usage; turn off for servers that reject it
    continuous_usage_stats: bool = True  # stream_options.continuous_usage_stats (vLLM, SGLang, speculab)
    logprobs: int | None = None  # request per-token logprobs with this many alternatives (0 = chosen token only)
    extra_body: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # False: ask the server to close each connection after its response (`Connection: close`). For servers that
    # drop a keep-alive connection after a streamed response without saying so (llama.cpp's llama-server): the next
    # request would otherwise land on a dead connection and fail as "server disconnected".
    keep_alive: bool = True
    # who reads each response's engine fields (speculation counts, what the record keeps): the adapter of the engine
    # behind the URL (`adapters.response_reader`), known where the endpoint is built; the client knows no engine
    read: ResponseReader = field(default=read_nothing, compare=False)

    def __post_init__(self) -> None:
        if self.api not in _PATHS:
            raise UserError(f"--api must be 'completions' or 'chat', not {self.api!r}")
        if self.timeout_s <= 0:
            raise UserError(f"--timeout must be positive seconds, got {self.timeout_s}")
        object.__setattr__(self, "base_url", normalize_base_url(self.base_url))

    @property
    def url(self) -> str:
        return self.base_url + _PATHS[self.api]

    def headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        if not self.keep_alive:
            h["Connection"] = "close"
        return h

    def to_manifest(self) -> dict[str, Any]:
        """Everything but the key itself (only whether one was used)."""
        return {
            "base_url": self.base_url,
            "model": self.model,
            "api": self.api,
            "stream": self.stream,
            "api_key_set": self.api_key is not None,
            "timeout_s": self.timeout_s,
            "include_usage": self.include_usage,
            "continuous_usage_stats": self.continuous_usage_stats,
            "logprobs": self.logprobs,
            "extra_body": dict(self.extra_body),
            "keep_alive": self.keep_alive,
        }


def normalize_base_url(url: str) -> str:
    """'http://h:8000/v1/' and 'http://h:8000' both become 'http://h:8000' (paths add /v1/...)."""
    u = url.strip().rstrip("/")
    if not (u.startswith("http://") or u.startswith("https://")):
        raise UserError(f"--url must start with http:// or https://, got {url!r}")
    for path in ("/v1/chat/completions", "/v1/completions", "/chat/completions", "/completions", "/v1/models"):
        if u.endswith(path):
            raise UserError(
                f"--url is the server's base address, not an endpoint: drop {path!r} "
                f"(e.g. --url {u[: -len(path)]}; --api chooses completions or chat)"
            )
    if u.endswith("/v1"):
        u = u[: -len("/v1")]
    return u


@dataclass(frozen=True, slots=True)
class RequestSampling:
    """Sampling parameters of a run, identical for every request (per-item max_tokens may override)."""

    max_tokens: int | None = 256  # for items without their own max_tokens
    temperature: float = 0.0
    top_p: float | None = None
    seed: int | None = 0  # run seed; a request without its own seed gets seed + index
    ignore_eos: bool = False  # vLLM/SGLang extension: generate exactly max_tokens
    max_tokens_overrides_items: bool = False  # True when the user set --max-tokens: it wins over per-item limits

    def __post_init__(self) -> None:
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UserError(f"--max-tokens must be at least 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise UserError(f"--temperature must be >= 0, got {self.temperature}")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise UserError(f"--top-p must be in (0, 1], got {self.top_p}")

    def request_seed(self, spec: RequestSpec) -> int | None:
        if spec.seed is not None:
            return spec.seed
        return None if self.seed is None else self.seed + spec.index


def build_payload(ep: EndpointConfig, sp: RequestSampling, spec: RequestSpec) -> dict[str, Any]:
    """The JSON body for one request."""
    body: dict[str, Any] = {"model": ep.model, "stream": ep.stream}
    if ep.api == "completions":
        if spec.prompt is None:
            raise UserError(f"workload item {spec.index} has only chat messages; use --api chat")
        body["prompt"] = spec.prompt
    else:
        body["messages"] = (
            [dict(m) for m in spec.messages] if spec.messages else [{"role": "user", "content": spec.prompt or ""}]
        )
    use_item = spec.max_tokens is not None and not sp.max_tokens_overrides_items
    max_tokens = spec.max_tokens if use_item else sp.max_tokens
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    body["temperature"] = sp.temperature
    if sp.top_p is not None:
        body["top_p"] = sp.top_p
    seed = sp.request_seed(spec)
    if seed is not None:
        body["seed"] = seed
    if sp.ignore_eos:
        body["ignore_eos"] = True
    if spec.response_format is not None:
        body["response_format"] = dict(spec.response_format)
    if ep.stream and ep.include_usage:
        opts: dict[str, Any] = {"include_usage": True}
        if ep.continuous_usage_stats:
            opts["continuous_usage_stats"] = True
        body["stream_options"] = opts
    if ep.logprobs is not None:
        if ep.api == "completions":
            body["logprobs"] = ep.logprobs
        else:
            body["logprobs"] = True
            body["top_logprobs"] = ep.logprobs
    body.update(ep.extra_body)
    return body


def parse_extra_body(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(
            f"--extra-body is not valid JSON ({e.msg}); give an object like '{{\"ignore_eos\": true}}'"
        ) from None
    if not isinstance(obj, dict):
        raise UserError("--extra-body must be a JSON object, e.g. '{\"top_k\": 20}'")
    # keys the harness sets from its own flags: overriding them here would silently break what it measures
    # (stream: false under a streaming reader fails every request; a different model or prompt is another run)
    owned = {"model": "--model", "stream": "--stream/--no-stream", "prompt": "--workload", "messages": "--workload"}
    owned |= {"max_tokens": "--max-tokens", "temperature": "--temperature", "top_p": "--top-p", "seed": "--seed"}
    clash = [k for k in obj if k in owned]
    if clash:
        k = clash[0]
        raise UserError(f"--extra-body sets {k!r}, which speculab sets itself; use {owned[k]} instead")
    return obj


def check_items(items: Sequence[RequestSpec], ep: EndpointConfig) -> None:
    """A completions endpoint needs prompts; chat accepts either."""
    if ep.api == "completions":
        for s in items:
            if s.prompt is None:
                raise UserError(f"workload item {s.index} has chat messages only; use --api chat")
