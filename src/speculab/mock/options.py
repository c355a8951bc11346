"""`speculab mock-server` flags (milliseconds where people think in them) -> a validated `MockConfig`."""

from __future__ import annotations

import json
from dataclasses import dataclass

from speculab.errors import UserError
from speculab.mock.script import MockConfig, parse_chunk_pattern


@dataclass(frozen=True, slots=True)
class MockFlags:
    """`speculab mock-server`'s flags as the CLI parsed them (milliseconds where people think in them): the CLI's
    defaults, held equal to these by tests/unit/test_cli_flags.py."""

    host: str = "127.0.0.1"
    port: int = 8000
    ttft_ms: float = 100.0
    ttft_jitter_ms: float = 0.0
    gap_ms: float = 20.0
    tokens_per_chunk: str = "1"
    output_tokens: int = 128
    prefill_ms_per_token: float = 0.0
    serial_prefill: bool = False
    startup_ms: float = 0.0
    cold_start_ms: float = 0.0
    idle_reset_s: float | None = None
    max_concurrency: int | None = None
    decode_slowdown: float = 0.0
    num_speculative_tokens: int | None = None
    per_request_spec_decode_metrics: bool = False
    speculative_config: str | None = None
    dev_mode: bool = False
    prefix_cache: bool = False
    prefix_cache_max_blocks: int = 65536
    max_model_len: int = 8192
    model: tuple[str, ...] = ("speculab-mock",)
    fault_5xx_rate: float = 0.0
    fault_429_rate: float = 0.0
    retry_after_s: float = 1.0
    fault_drop_rate: float = 0.0
    fault_malformed_rate: float = 0.0
    fault_error_event_rate: float = 0.0
    fault_stall_rate: float = 0.0
    fault_stall_s: float = 3600.0
    seed: int = 0
    record_send_times: bool = False
    api_key: str | None = None
    request_receive_timeout: float = 30.0
    spin_ms: float = 0.0


def mock_config_from_flags(f: MockFlags) -> MockConfig:
    """The CLI's flags (their parameter names) -> the mock's script; a bad value is one UserError line."""
    pattern = parse_chunk_pattern(f.tokens_per_chunk)
    k = f.num_speculative_tokens  # default: the largest chunk carries k drafted tokens and the bonus one
    if k is None and f.speculative_config:
        k = _k_of(f.speculative_config)
    try:
        return MockConfig(
            ttft_s=f.ttft_ms / 1e3,
            ttft_jitter_s=f.ttft_jitter_ms / 1e3,
            gap_s=f.gap_ms / 1e3,
            tokens_per_chunk=pattern if len(pattern) > 1 else pattern[0],
            output_tokens=f.output_tokens,
            models=tuple(f.model),
            max_model_len=f.max_model_len,
            prefill_s_per_token=f.prefill_ms_per_token / 1e3,
            serial_prefill=f.serial_prefill,
            startup_s=f.startup_ms / 1e3,
            cold_start_s=f.cold_start_ms / 1e3,
            idle_reset_s=f.idle_reset_s,
            max_concurrency=f.max_concurrency,
            decode_slowdown_per_request=f.decode_slowdown,
            num_speculative_tokens=max(pattern) - 1 if k is None else k,
            per_request_spec_metrics=f.per_request_spec_decode_metrics,
            prefix_cache=f.prefix_cache,
            prefix_cache_max_blocks=f.prefix_cache_max_blocks,
            dev_mode=f.dev_mode,
            fault_5xx_rate=f.fault_5xx_rate,
            fault_429_rate=f.fault_429_rate,
            retry_after_s=f.retry_after_s,
            fault_drop_rate=f.fault_drop_rate,
            fault_malformed_rate=f.fault_malformed_rate,
            fault_error_event_rate=f.fault_error_event_rate,
            fault_stall_rate=f.fault_stall_rate,
            fault_stall_s=f.fault_stall_s,
            seed=f.seed,
            record_send_times=f.record_send_times,
            spin_s=f.spin_ms / 1e3,
            api_key=f.api_key,
            request_receive_timeout_s=f.request_receive_timeout,
        )
    except ValueError as e:
        raise UserError(f"invalid mock-server settings: {e}") from None


def _k_of(text: str) -> int:
    """vLLM's `--speculative-config JSON`, taken for its k: the mock then poses as vLLM in a launch experiment
    (`engine: vllm` derives the candidate's command by adding the flag to the baseline's)."""
    try:
        k = json.loads(text).get("num_speculative_tokens")
    except (ValueError, AttributeError):
        k = None
    if not isinstance(k, int) or isinstance(k, bool) or k < 0:
        raise UserError(f"--speculative-config must be JSON with num_speculative_tokens (an integer); got {text!r}")
    return k
