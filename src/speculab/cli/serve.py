"""`speculab serve | mock-server`: the reference engine and the scripted server."""

from __future__ import annotations

import sys
from typing import Any

import typer

from speculab.cli.app import app, err_console
from speculab.errors import UserError


# --- serve (reference engine) ---
@app.command()
def serve(  # long: one line per flag (typer reads the signature), then the engine's config record
    model: str = typer.Argument(..., help="Model directory (config.json + safetensors + tokenizer.json), or 'demo'."),
    host: str = typer.Option("127.0.0.1", help="Address to bind; 0.0.0.0 exposes the server to the network."),
    port: int = typer.Option(8000, help="TCP port."),
    max_num_seqs: int = typer.Option(8, help="Concurrent sequences (KV cache slots)."),
    max_model_len: int | None = typer.Option(
        None, help="Prompt + output tokens per sequence (default: the model's, at most 4096)."
    ),
    max_num_batched_tokens: int | None = typer.Option(
        None, help="Token budget per engine step (default: 512 on CPU, 2048 on CUDA)."
    ),
    max_waiting: int = typer.Option(256, help="Waiting-queue bound; beyond it requests get HTTP 429."),
    dtype: str = typer.Option("auto", help="auto (float32 on CPU, bfloat16 on CUDA), float32, bfloat16, float16."),
    device: str = typer.Option("auto", help="auto, cpu, cuda, cuda:N."),
    api_key: str | None = typer.Option(
        None, help="Require 'Authorization: Bearer KEY' on /v1/* and /openapi.json (and /metrics if private)."
    ),
    served_model_name: str | None = typer.Option(None, help="Model name clients send (default: MODEL as given)."),
    seed: int = typer.Option(0, help="Seed for requests that do not send their own."),
    threads: int | None = typer.Option(
        None, help="torch CPU threads (default: torch's, one per core); 1 leaves room for a client on a small machine."
    ),
    speculative_config: str | None = typer.Option(
        None,
        help='Speculative decoding, vLLM-style JSON: \'{"method":"ngram","num_speculative_tokens":4}\' or '
        '\'{"method":"draft_model","model":"DIR|demo-draft","num_speculative_tokens":4}\' (docs/speculative.md).',
    ),
    forced_acceptance_rates: str | None = typer.Option(
        None,
        help="A cost probe, not a server to use: accept drafts by a seeded draw to these per-position unconditional "
        "rates, e.g. 0.8,0.6,0.4 (vLLM's synthetic_acceptance_rates: non-increasing, at most k, missing positions 0) "
        "instead of by the target. Output is then NOT the target's distribution (docs/speculative.md).",
    ),
    max_request_bytes: int = typer.Option(
        4 * 1024 * 1024, help="Largest request body; larger ones get HTTP 413 before they are read."
    ),
    max_header_bytes: int = typer.Option(16 * 1024, help="Largest request line + headers; larger get HTTP 431."),
    max_prompt_tokens: int | None = typer.Option(
        None, help="Longest prompt in tokens (default: the context minus one); longer ones get HTTP 400."
    ),
    metrics_public: bool = typer.Option(
        True, "--metrics-public/--metrics-private", help="Under --api-key, serve /metrics without the key (default)."
    ),
    request_receive_timeout_s: float = typer.Option(
        30.0,
        "--request-receive-timeout",
        help="Seconds a client has to send a whole request (line, headers, body); then 408 and close. 0: no limit.",
    ),
) -> None:
    """Serve a model with speculab's reference engine (OpenAI API, continuous batching, Prometheus /metrics)."""
    try:
        from speculab.engine.server.launch import ServeConfig
        from speculab.engine.server.launch import serve as run_server
        from speculab.engine.speculative.forced import parse_forced_rates
    except ImportError as e:
        raise UserError(
            f"speculab serve needs the engine extra ({e.name} is missing): pip install 'speculab[engine]'"
        ) from None
    rates = None if forced_acceptance_rates is None else parse_forced_rates(forced_acceptance_rates)
    cfg = ServeConfig(
        model=model,
        host=host,
        port=port,
        max_num_seqs=max_num_seqs,
        max_model_len=max_model_len,
        max_num_batched_tokens=max_num_batched_tokens,
        max_waiting=max_waiting,
        dtype=None if dtype == "auto" else dtype,  # auto: float32 on CPU, bfloat16 on CUDA (the engine picks)
        device=device,
        api_key=api_key,
        served_model_name=served_model_name,
        seed=seed,
        threads=threads,
        speculative_config=speculative_config,
        forced_acceptance_rates=rates,
        max_request_bytes=max_request_bytes,
        max_header_bytes=max_header_bytes,
        max_prompt_tokens=max_prompt_tokens,
        metrics_public=metrics_public,
        request_receive_timeout_s=request_receive_timeout_s,
    )

    def ready(url: str, open_files: int | None) -> None:
        files = f"; open files limit {open_files}" if open_files is not None else ""
        rates = cfg.forced_acceptance_rates
        forced = "" if rates is None else f"; FORCED acceptance {','.join(f'{r:g}' for r in rates)}: a cost probe"
        err_console.print(
            f"speculab engine ready: {url}/v1 (model {cfg.served_model_name or model!r}{files}{forced})",
            highlight=False,
            soft_wrap=True,
        )

    run_server(cfg, on_ready=ready)


# --- mock-server ---------------------------------------------------------------------------------------------


@app.command("mock-server")
def mock_server(  # long: one line per flag (typer reads the signature), then the typed record they make
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(8000, help="Port to bind; 0 picks a free one."),
    ttft_ms: float = typer.Option(100.0, help="Time to first chunk once admitted, for a prompt with no prefill cost."),
    ttft_jitter_ms: float = typer.Option(0.0, help="Adds a seeded uniform [0, this) to each TTFT."),
    gap_ms: float = typer.Option(20.0, help="Time between chunks of one stream."),
    tokens_per_chunk: str = typer.Option("1", help="Tokens per chunk: N, or a per-chunk pattern like 3,1,2."),
    output_tokens: int = typer.Option(128, help="Natural output length in tokens; a request's max_tokens caps it."),
    prefill_ms_per_token: float = typer.Option(0.0, help="Extra TTFT per (uncached) prompt token."),
    serial_prefill: bool = typer.Option(
        False, "--serial-prefill", help="Prefills run one at a time: TTFT grows under load, decode does not."
    ),
    startup_ms: float = typer.Option(0.0, help="Wait this long before listening, like a server loading a model."),
    cold_start_ms: float = typer.Option(0.0, help="Extra delay for the first request (and after --idle-reset-s)."),
    idle_reset_s: float = typer.Option(None, help="Idle seconds after which the server is cold again."),
    max_concurrency: int = typer.Option(None, help="Requests beyond this many queue server-side."),
    decode_slowdown: float = typer.Option(0.0, help="Gap grows by this fraction per extra running request."),
    switch_above: int = typer.Option(
        None, help="When the requests running rise above this, each running one stalls --switch-stall-ms once."
    ),
    switch_stall_ms: float = typer.Option(0.0, help="The stall at a switch (--switch-above)."),
    num_speculative_tokens: int = typer.Option(
        None, help="k of the vLLM spec-decode counters; default: largest chunk - 1 (0: no counters)."
    ),
    per_request_spec_decode_metrics: bool = typer.Option(
        False,
        "--per-request-spec-decode-metrics",
        help="Each response carries vLLM's per-request metrics.speculative_decoding (vLLM's flag of that name).",
    ),
    speculative_config: str = typer.Option(
        None, help="vLLM's flag, read for its k and its synthetic (forced) acceptance: the mock poses as vLLM."
    ),
    step_batched: bool = typer.Option(
        False,
        "--step-batched",
        help="One engine loop batches every request in flight in steps (a scripted engine with a known truth).",
    ),
    step_ms: float = typer.Option(20.0, help="--step-batched: every step's fixed cost."),
    step_ms_per_request: float = typer.Option(0.0, help="--step-batched: a step's cost per request in the batch."),
    verify_ms_per_request_token: float = typer.Option(
        0.0, help="--step-batched: a speculative step's cost per request x draft position."
    ),
    draft_ms_per_token: float = typer.Option(0.0, help="--step-batched: a speculative step's cost per draft position."),
    acceptance_rates: str = typer.Option(
        None, help="--step-batched: the content's conditional acceptance per draft position, like 0.8,0.7,0.6."
    ),
    forced_acceptance_rates: str = typer.Option(
        None,
        help="--step-batched: forced unconditional acceptance per position (vLLM's synthetic rates), like 0.8,0.6.",
    ),
    dev_mode: bool = typer.Option(
        False, "--dev-mode", envvar="VLLM_SERVER_DEV_MODE", help="Serve POST /reset_prefix_cache (vLLM's dev mode)."
    ),
    prefix_cache: bool = typer.Option(False, "--prefix-cache", help="Cached prompt prefixes cost no prefill."),
    prefix_cache_max_blocks: int = typer.Option(65536, help="Prefix-cache capacity in 16-token blocks (LRU)."),
    max_model_len: int = typer.Option(8192, help="Context length (prompt + output tokens)."),
    model: list[str] = typer.Option(["speculab-mock"], "--model", help="Served model name (repeat for several)."),
    fault_5xx_rate: float = typer.Option(0.0, help="Share of requests answered with HTTP 500."),
    fault_429_rate: float = typer.Option(0.0, help="Share of requests answered with HTTP 429 + Retry-After."),
    retry_after_s: float = typer.Option(1.0, help="Retry-After of the 429 faults."),
    fault_drop_rate: float = typer.Option(0.0, help="Share of streams whose connection drops mid-way."),
    fault_malformed_rate: float = typer.Option(0.0, help="Share of streams with one malformed SSE event."),
    fault_error_event_rate: float = typer.Option(0.0, help="Share of streams ending in an error event."),
    fault_stall_rate: float = typer.Option(0.0, help="Share of streams that stall mid-way."),
    fault_stall_s: float = typer.Option(3600.0, help="How long a stall lasts."),
    seed: int = typer.Option(0, help="Seed of the fault draws."),
    record_send_times: bool = typer.Option(
        False, "--record-send-times", help="Keep chunk write times for GET /mock/send_times (client benchmarks)."
    ),
    truth_log: str | None = typer.Option(
        None,
        "--truth-log",
        help="Write what was done with each streamed request to this file (JSON lines, CLOCK_REALTIME ns): when it "
        "was received, each chunk's write (client timing benchmarks).",
    ),
    api_key: str | None = typer.Option(None, "--api-key", help="Require 'Authorization: Bearer KEY' on /v1/*."),
    request_receive_timeout: float = typer.Option(
        30.0,
        "--request-receive-timeout",
        help="Seconds a client has to send a whole request (line, headers, body); then 408 and close. 0: no limit.",
    ),
    spin_ms: float = typer.Option(
        0.0,
        help="Spin (yielding) this long before each chunk instead of sleeping: writes land within ~0.05 ms "
        "of the script instead of 1-2 ms late, at the cost of CPU; 2.5 covers asyncio's overshoot.",
    ),
    loop_after_tokens: int | None = typer.Option(
        None,
        help="Degenerate: after N output tokens fall into a loop, the next --loop-period tokens repeated to the end, "
        "at any temperature (a candidate the degeneration check must flag).",
    ),
    loop_period: int = typer.Option(8, help="--loop-after-tokens: the loop's period in tokens."),
    stream_drop_last_tokens: int = typer.Option(
        0,
        help="A scripted streaming defect: a streamed response leaves out its last N tokens' text (unary ones keep "
        "them).",
    ),
) -> None:
    """Serve a scripted OpenAI-compatible endpoint: known TTFT, gaps, tokens per chunk, counters and faults."""
    from speculab.mock.options import MockFlags, mock_config_from_flags

    flags = MockFlags(
        host=host,
        port=port,
        ttft_ms=ttft_ms,
        ttft_jitter_ms=ttft_jitter_ms,
        gap_ms=gap_ms,
        tokens_per_chunk=tokens_per_chunk,
        output_tokens=output_tokens,
        prefill_ms_per_token=prefill_ms_per_token,
        serial_prefill=serial_prefill,
        startup_ms=startup_ms,
        cold_start_ms=cold_start_ms,
        idle_reset_s=idle_reset_s,
        max_concurrency=max_concurrency,
        decode_slowdown=decode_slowdown,
        switch_above=switch_above,
        switch_stall_ms=switch_stall_ms,
        num_speculative_tokens=num_speculative_tokens,
        per_request_spec_decode_metrics=per_request_spec_decode_metrics,
        speculative_config=speculative_config,
        step_batched=step_batched,
        step_ms=step_ms,
        step_ms_per_request=step_ms_per_request,
        verify_ms_per_request_token=verify_ms_per_request_token,
        draft_ms_per_token=draft_ms_per_token,
        acceptance_rates=acceptance_rates,
        forced_acceptance_rates=forced_acceptance_rates,
        dev_mode=dev_mode,
        prefix_cache=prefix_cache,
        prefix_cache_max_blocks=prefix_cache_max_blocks,
        max_model_len=max_model_len,
        model=tuple(model),
        fault_5xx_rate=fault_5xx_rate,
        fault_429_rate=fault_429_rate,
        retry_after_s=retry_after_s,
        fault_drop_rate=fault_drop_rate,
        fault_malformed_rate=fault_malformed_rate,
        fault_error_event_rate=fault_error_event_rate,
        fault_stall_rate=fault_stall_rate,
        fault_stall_s=fault_stall_s,
        seed=seed,
        record_send_times=record_send_times,
        truth_log=truth_log,
        api_key=api_key,
        request_receive_timeout=request_receive_timeout,
        spin_ms=spin_ms,
        loop_after_tokens=loop_after_tokens,
        loop_period=loop_period,
        stream_drop_last_tokens=stream_drop_last_tokens,
    )
    _serve_mock(mock_config_from_flags(flags), host, port)


def _serve_mock(cfg: Any, host: str, port: int) -> None:
    """Run the mock until Ctrl-C or SIGTERM; an address it cannot listen on is one line naming the fix."""
    import errno

    from speculab.mock.server import run_mock_server

    def ready(url: str, open_files: int | None) -> None:
        files = f", open files {open_files}" if open_files is not None else ""
        typer.echo(f"speculab mock-server ready at {url} (model {cfg.models[0]}{files}); Ctrl-C stops it", err=False)
        sys.stdout.flush()

    try:
        run_mock_server(cfg, host, port, ready)
        err_console.print("mock-server stopped")  # SIGTERM
    except KeyboardInterrupt:
        err_console.print("mock-server stopped")
    except OSError as e:
        if e.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            raise UserError(
                f"cannot listen on {host}:{port} ({e.strerror}); pass another --port, or --port 0"
            ) from None
        raise
