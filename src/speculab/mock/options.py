"""`speculab mock-server` flags (milliseconds where people think in them) -> a validated `MockConfig`."""

from __future__ import annotations

import json
from typing import Any

from speculab.errors import UserError
from speculab.mock.script import MockConfig, parse_chunk_pattern


def mock_config_from_flags(f: dict[str, Any]) -> MockConfig:
    """The CLI's flags (their parameter names) -> the mock's script; a bad value is one UserError line."""
    pattern = parse_chunk_pattern(f["tokens_per_chunk"])
    k = f["num_speculative_tokens"]  # default: the largest chunk carries k drafted tokens and the bonus one
    if k is None and f.get("speculative_config"):
        k = _k_of(f["speculative_config"])
    try:
        return MockConfig(
            ttft_s=f["ttft_ms"] / 1e3,
            ttft_jitter_s=f["ttft_jitter_ms"] / 1e3,
            gap_s=f["gap_ms"] / 1e3,
            tokens_per_chunk=pattern if len(pattern) > 1 else pattern[0],
            output_tokens=f["output_tokens"],
            models=tuple(f["model"]),
            max_model_len=f["max_model_len"],
            prefill_s_per_token=f["prefill_ms_per_token"] / 1e3,
            serial_prefill=f["serial_prefill"],
            startup_s=f["startup_ms"] / 1e3,
            cold_start_s=f["cold_start_ms"] / 1e3,
            idle_reset_s=f["idle_reset_s"],
            max_concurrency=f["max_concurrency"],
            decode_slowdown_per_request=f["decode_slowdown"],
            num_speculative_tokens=max(pattern) - 1 if k is None else k,
            per_request_spec_metrics=f["per_request_spec_decode_metrics"],
            prefix_cache=f["prefix_cache"],
            prefix_cache_max_blocks=f["prefix_cache_max_blocks"],
            dev_mode=f.get("dev_mode", False),
            fault_5xx_rate=f["fault_5xx_rate"],
            fault_429_rate=f["fault_429_rate"],
            retry_after_s=f["retry_after_s"],
            fault_drop_rate=f["fault_drop_rate"],
            fault_malformed_rate=f["fault_malformed_rate"],
            fault_error_event_rate=f["fault_error_event_rate"],
            fault_stall_rate=f["fault_stall_rate"],
            fault_stall_s=f["fault_stall_s"],
            seed=f["seed"],
            record_send_times=f["record_send_times"],
            spin_s=f["spin_ms"] / 1e3,
            api_key=f["api_key"],
            request_receive_timeout_s=f["request_receive_timeout"],
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
