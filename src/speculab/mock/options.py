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
    switch_above: int | None = None
    switch_stall_ms: float = 0.0
    num_speculative_tokens: int | None = None
    per_request_spec_decode_metrics: bool = False
    speculative_config: str | None = None
    step_batched: bool = False
    step_ms: float = 20.0
    step_ms_per_request: float = 0.0
    verify_ms_per_request_token: float = 0.0
    draft_ms_per_token: float = 0.0
    acceptance_rates: str | None = None
    forced_acceptance_rates: str | None = None
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
    truth_log: str | None = None
    api_key: str | None = None
    request_receive_timeout: float = 30.0
    spin_ms: float = 0.0
    loop_after_tokens: int | None = None
    loop_period: int = 8
    stream_drop_last_tokens: int = 0


def mock_config_from_flags(f: MockFlags) -> MockConfig:
    """The CLI's flags (their parameter names) -> the mock's script; a bad value is one UserError line."""
    pattern = parse_chunk_pattern(f.tokens_per_chunk)
    k, synthetic = _speculative_config_of(f.speculative_config) if f.speculative_config else (None, None)
    if f.num_speculative_tokens is not None:
        k = f.num_speculative_tokens
    forced = _rates(f.forced_acceptance_rates, "--forced-acceptance-rates")
    if synthetic is not None:
        if forced is not None:
            raise UserError(
                "forced acceptance is given twice (--forced-acceptance-rates and the --speculative-config's "
                "synthetic rates): keep one"
            )
        forced = synthetic
    if k is None:  # default: the forced rates' positions, else the largest chunk's k drafted tokens and bonus one
        k = len(forced) if forced is not None else max(pattern) - 1
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
            switch_above=f.switch_above,
            switch_stall_s=f.switch_stall_ms / 1e3,
            num_speculative_tokens=k,
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
            truth_log=f.truth_log,
            spin_s=f.spin_ms / 1e3,
            api_key=f.api_key,
            request_receive_timeout_s=f.request_receive_timeout,
            step_batched=f.step_batched,
            step_s=f.step_ms / 1e3,
            step_s_per_request=f.step_ms_per_request / 1e3,
            verify_s_per_request_token=f.verify_ms_per_request_token / 1e3,
            draft_s_per_token=f.draft_ms_per_token / 1e3,
            acceptance_rates=_rates(f.acceptance_rates, "--acceptance-rates") or (),
            forced_acceptance_rates=forced,
            loop_after_tokens=f.loop_after_tokens,
            loop_period=f.loop_period,
            stream_drop_last_tokens=f.stream_drop_last_tokens,
        )
    except ValueError as e:
        raise UserError(f"invalid mock-server settings: {e}") from None


def _rates(text: str | None, flag: str) -> tuple[float, ...] | None:
    """`0.8,0.6,0.4` -> per-position rates; None when the flag is not given."""
    if text is None:
        return None
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise UserError(f"{flag} takes one rate per draft position, like 0.8,0.6,0.4; got {text!r}") from None


def _speculative_config_of(text: str) -> tuple[int, tuple[float, ...] | None]:
    """vLLM's `--speculative-config JSON`, taken for its k and its forced acceptance (`rejection_sample_method:
    synthetic` with `synthetic_acceptance_rates` or `synthetic_acceptance_length`, vLLM's rule for the latter): the
    mock then poses as vLLM in a launch experiment (`engine: vllm` derives the candidate's command, and a forced
    probe's, by adding the flag to the baseline's)."""
    try:
        config = json.loads(text)
        k = config.get("num_speculative_tokens")
    except (ValueError, AttributeError):
        k = None
    if not isinstance(k, int) or isinstance(k, bool) or k < 0:
        raise UserError(f"--speculative-config must be JSON with num_speculative_tokens (an integer); got {text!r}")
    if config.get("rejection_sample_method") != "synthetic":
        return k, None
    rates, length = config.get("synthetic_acceptance_rates"), config.get("synthetic_acceptance_length")
    if (rates is None) == (length is None):
        raise UserError(
            "--speculative-config with rejection_sample_method 'synthetic' needs exactly one of "
            "synthetic_acceptance_rates or synthetic_acceptance_length"
        )
    if rates is not None:
        if not isinstance(rates, list) or not all(isinstance(r, (int, float)) for r in rates):
            raise UserError(f"synthetic_acceptance_rates must be a list of numbers; got {rates!r}")
        return k, tuple(float(r) for r in rates)
    if not isinstance(length, (int, float)) or not 1 <= length <= k + 1:
        raise UserError(f"synthetic_acceptance_length must be a number in [1, {k + 1}]; got {length!r}")
    # vLLM's minimum-variance schedule: whole accepted drafts first, the fraction on the next position
    full = int(length - 1)
    return k, tuple(([1.0] * full + [length - 1 - full] + [0.0] * k)[:k])
