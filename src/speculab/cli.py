"""argv -> config -> library call -> exit code. Nothing else lives here.

Each command parses and validates its flags, calls one library function, prints through
`speculab.report.console`, and maps `UserError` to a one-line message and an exit code.
"""

from __future__ import annotations

import contextlib
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from speculab import __version__
from speculab.errors import EndpointError, ErrorRateExceeded, UserError

try:  # typer >= 0.20 vendors its own click
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older typer on real click
    from click.exceptions import NoArgsIsHelpError, UsageError

app = typer.Typer(
    name="speculab",
    help="Does speculative decoding make my LLM endpoint faster and cheaper - and is it still correct?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True)


@app.command()
def version() -> None:
    """Print speculab's version."""
    typer.echo(__version__)


# --- commands are registered below, one block each (bench, mock-server, serve, run, compare, demo, ...) ---
# A command's parameters are its flags (typer declares one per line), so the long signatures below are
# declarations, not logic: each body parses, calls one library function, prints, and maps the outcome to an exit code.

_FIT_HELP = "Prompts that cannot fit the context with max_tokens: skip (leave out) | cap (lower max_tokens) | refuse"
_MAX_ERROR_HELP = (
    "Fail (exit 4) when more than this share of requests failed, after writing results; cancelled ones do not count"
)


def _max_error_rate() -> Any:
    from speculab.harness.analysis.metrics import DEFAULT_MAX_ERROR_RATE

    return typer.Option(DEFAULT_MAX_ERROR_RATE, "--max-error-rate", min=0.0, max=1.0, help=_MAX_ERROR_HELP)


def _check_error_gate(why: str | None, where: Path | None) -> None:
    """Exit 4 with one line when the error gate failed (results were written and printed before)."""
    if why is not None:
        raise ErrorRateExceeded(why + (f"; what was measured is in {where}" if where is not None else ""))


@app.command()
def bench(
    url: str = typer.Option(..., "--url", help="Base URL of an OpenAI-compatible server, e.g. http://localhost:8000"),
    output: Path = typer.Option(..., "--output", "-o", help="New directory for manifest, requests and summary"),
    model: str = typer.Option("", "--model", help="Served model name (default: the only one the server serves)"),
    api: str = typer.Option("completions", "--api", help="completions | chat"),
    workload: str = typer.Option(
        "builtin:mixed",
        "--workload",
        help="builtin:NAME, file.jsonl, sharegpt:PATH, specbench:PATH, mtbench:PATH, trace:PATH, synthetic:...",
    ),
    num_prompts: int | None = typer.Option(None, "--num-prompts", help="Measured requests (default: every item once)"),
    concurrency: int | None = typer.Option(None, "--concurrency", help="Closed loop: N in flight; --rate/trace: a cap"),
    rate: float | None = typer.Option(None, "--rate", help="Open loop: requests per second"),
    trace_speed: float | None = typer.Option(
        None, "--trace-speed", help="trace:PATH workloads: replay the arrivals this many times faster (default 1)"
    ),
    workers: int = typer.Option(1, "--workers", help="Client processes sharing the load (one machine, or with --ray)"),
    ray: str | None = typer.Option(
        None, "--ray", help="Run the --workers as Ray actors: auto | local | a cluster address (pip: speculab[ray])"
    ),
    arrival: str = typer.Option("poisson", "--arrival", help="Open-loop arrivals: poisson | constant | gamma"),
    burstiness: float = typer.Option(1.0, "--burstiness", help="Gamma shape: 1 = Poisson, < 1 burstier"),
    duration: float | None = typer.Option(None, "--duration", help="Stop sending new requests after S seconds"),
    warmup: int = typer.Option(0, "--warmup", help="Warmup requests before measuring (excluded from results)"),
    ramp_up: float = typer.Option(
        0.0, "--ramp-up", help="Closed loop: spread the N workers' first requests over S seconds (no lockstep)"
    ),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="Output limit (default: the item's, else 256)"),
    fit: str = typer.Option("skip", "--fit", help=_FIT_HELP),
    max_model_len: int | None = typer.Option(None, "--max-model-len", help="Context length (default: /v1/models)"),
    temperature: float = typer.Option(0.0, "--temperature"),
    top_p: float | None = typer.Option(None, "--top-p"),
    seed: int = typer.Option(0, "--seed", help="Run seed: per-request sampling seeds and arrival times"),
    ignore_eos: bool = typer.Option(False, "--ignore-eos", help="Ask the server to generate exactly max tokens"),
    stream: bool = typer.Option(True, "--stream/--no-stream", help="Streamed (SSE) or whole responses"),
    timeout: float = typer.Option(600.0, "--timeout", help="Per-request timeout, seconds"),
    include_usage: bool = typer.Option(True, "--include-usage/--no-include-usage", help="stream_options.include_usage"),
    continuous_usage: bool = typer.Option(
        True, "--continuous-usage/--no-continuous-usage", help="stream_options.continuous_usage_stats"
    ),
    logprobs: int | None = typer.Option(None, "--logprobs", help="Request per-token logprobs (N alternatives)"),
    extra_body: str | None = typer.Option(None, "--extra-body", help="JSON object merged into every request body"),
    api_key: str | None = typer.Option(None, "--api-key", help="Default: $SPECULAB_API_KEY or $OPENAI_API_KEY"),
    tokenizer: str | None = typer.Option(None, "--tokenizer", help="tokenizer.json (or dir) to count chunk tokens"),
    slo_ttft: float | None = typer.Option(None, "--slo-ttft", help="Goodput SLO on TTFT, seconds"),
    slo_tpot: float | None = typer.Option(None, "--slo-tpot", help="Goodput SLO on TPOT, seconds"),
    slo_e2e: float | None = typer.Option(None, "--slo-e2e", help="Goodput SLO on E2E latency, seconds"),
    stall_threshold: float = typer.Option(0.2, "--stall-threshold", help="Stall: gap above this many seconds..."),
    stall_k: float = typer.Option(3.0, "--stall-k", help="...and above k x the request's median gap"),
    scrape: bool = typer.Option(True, "--scrape/--no-scrape", help="Diff Prometheus /metrics before and after"),
    max_error_rate: float = _max_error_rate(),
) -> None:
    """Measure one OpenAI-compatible endpoint: TTFT, TPOT, gaps, stalls, throughput, errors, acceptance."""
    from speculab.harness.analysis.metrics import error_gate
    from speculab.harness.measure.options import bench_config_from_flags
    from speculab.harness.measure.run import run_bench_interruptible
    from speculab.report.console.bench import BenchProgress, print_bench_summary

    cfg, items, count_tokens = bench_config_from_flags(dict(locals()), argv=sys.argv)
    console = Console()
    with BenchProgress(console) as progress:
        result = run_bench_interruptible(cfg, items, on_progress=progress.update, count_tokens=count_tokens)
    print_bench_summary(console, result.summary, result.run_dir)
    if result.interrupted:
        err_console.print("interrupted: results of the part that ran are on disk")
        raise typer.Exit(130)
    c = result.summary["counts"]
    _check_error_gate(error_gate(c["error"], c["sent"], c["errors_by_category"], max_error_rate), result.run_dir)


# --- workload: list the built-in sets, or load and check a workload without sending anything ---------------------


@app.command("workload")
def workload_command(
    spec: str = typer.Argument(
        "",
        help="builtin:NAME, PATH.jsonl, jsonl:PATH, sharegpt:PATH, specbench:PATH, mtbench:PATH, trace:PATH or "
        "synthetic:input=N,output=N; omit to list",
    ),
    num_prompts: int = typer.Option(0, "--num-prompts", min=0, help="take (or cycle to) this many requests; 0: all"),
    api: str = typer.Option("completions", "--api", help="completions or chat: how prompts are rendered"),
    seed: int = typer.Option(0, "--seed", min=0, help="run seed: per-request seeds and synthetic text"),
    show: int = typer.Option(0, "--show", min=0, help="also print the first N requests"),
) -> None:
    """List the built-in workloads, or load one (reporting any problem by file and line) and summarize it."""
    from speculab.harness.workload.builtin import list_builtin
    from speculab.harness.workload.sources import load_workload, workload_overview
    from speculab.report.console.workload import print_builtin_workloads, print_workload

    console = Console(soft_wrap=True)
    if not spec:
        print_builtin_workloads(console, list_builtin())
        return
    wl = load_workload(spec, seed=seed, num_prompts=num_prompts or None, api=api)
    print_workload(console, workload_overview(wl, show=show))


# --- serve (reference engine) ---
@app.command()
def serve(
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
) -> None:
    """Serve a model with speculab's reference engine (OpenAI API, continuous batching, Prometheus /metrics)."""
    try:
        from speculab.engine.server.launch import serve as run_server
        from speculab.engine.server.launch import serve_config_from_flags
    except ImportError as e:
        raise UserError(
            f"speculab serve needs the engine extra ({e.name} is missing): pip install 'speculab[engine]'"
        ) from None
    cfg = serve_config_from_flags(dict(locals()))

    def ready(url: str) -> None:
        err_console.print(
            f"speculab engine ready: {url}/v1 (model {cfg.served_model_name or model!r})", highlight=False
        )

    run_server(cfg, on_ready=ready)


# --- mock-server ---------------------------------------------------------------------------------------------


@app.command("mock-server")
def mock_server(
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
    num_speculative_tokens: int = typer.Option(
        None, help="k of the vLLM spec-decode counters; default: largest chunk - 1 (0: no counters)."
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
    api_key: str | None = typer.Option(None, "--api-key", help="Require 'Authorization: Bearer KEY' on /v1/*."),
    spin_ms: float = typer.Option(
        0.0,
        help="Spin (yielding) this long before each chunk instead of sleeping: writes land within ~0.05 ms "
        "of the script instead of 1-2 ms late, at the cost of CPU; 2.5 covers asyncio's overshoot.",
    ),
) -> None:
    """Serve a scripted OpenAI-compatible endpoint: known TTFT, gaps, tokens per chunk, counters and faults."""
    import asyncio
    import errno

    from speculab.harness.mock.options import mock_config_from_flags
    from speculab.harness.mock.server import serve_mock

    cfg = mock_config_from_flags(dict(locals()))

    def ready(url: str) -> None:
        typer.echo(f"speculab mock-server ready at {url} (model {cfg.models[0]}); Ctrl-C stops it", err=False)
        sys.stdout.flush()

    try:
        asyncio.run(serve_mock(cfg, host, port, ready))
        err_console.print("mock-server stopped")  # SIGTERM
    except KeyboardInterrupt:
        err_console.print("mock-server stopped")
    except OSError as e:
        if e.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            raise UserError(
                f"cannot listen on {host}:{port} ({e.strerror}); pass another --port, or --port 0"
            ) from None
        raise


# --- diagnose: which latency problem is this (cold start, queueing, prefill, decode)? ---------------------------


@app.command()
def diagnose(
    url: str | None = typer.Option(None, "--url", help="Server base URL (with --launch-cmd: where it will listen)"),
    output: Path | None = typer.Option(None, "--output", "-o", help="New directory (default: ./diagnose-TIMESTAMP)"),
    model: str | None = typer.Option(None, "--model", help="Served model name (default: the only one served)"),
    api: str | None = typer.Option(None, "--api", help="completions | chat (default completions)"),
    workload: str | None = typer.Option(None, "--workload", help="Your workload (default builtin:mixed)"),
    num_prompts: int | None = typer.Option(None, "--num-prompts", help="Workload requests per load (default 16)"),
    concurrency: int | None = typer.Option(
        None, "--concurrency", help="Your operating point (closed loop; with a trace: a cap); 1: no queueing check"
    ),
    trace_speed: float | None = typer.Option(
        None, "--trace-speed", help="trace:PATH workloads: the operating point replays the trace this fast (default 1)"
    ),
    workers: int = typer.Option(1, "--workers", help="Client processes offering the operating point's load"),
    ray: str | None = typer.Option(
        None, "--ray", help="Run the --workers as Ray actors: auto | local | a cluster address (pip: speculab[ray])"
    ),
    max_tokens: int | None = typer.Option(None, "--max-tokens", help="Output limit for workload requests"),
    temperature: float | None = typer.Option(None, "--temperature"),
    seed: int | None = typer.Option(None, "--seed", help="Workload seed (per-request sampling seeds)"),
    ignore_eos: bool = typer.Option(False, "--ignore-eos", help="Ask the server to generate exactly max tokens"),
    max_model_len: int | None = typer.Option(None, "--max-model-len", help="Context length (default: /v1/models)"),
    max_prompt_tokens: int | None = typer.Option(None, "--max-prompt-tokens", help="Longest prompt of the sweep"),
    sweep_points: int = typer.Option(6, "--sweep-points", help="Prompt lengths in the prefill sweep"),
    sweep_repeats: int = typer.Option(3, "--sweep-repeats", help="Requests per prompt length"),
    idle: float = typer.Option(0.0, "--idle", help="Also probe after this many idle seconds (scale-to-zero)"),
    prefix_tokens: int | None = typer.Option(None, "--prefix-tokens", help="Shared prefix length of the cache probe"),
    probe_seed: int | None = typer.Option(None, "--probe-seed", help="Seed of probe prompts (default: fresh text)"),
    launch_cmd: str | None = typer.Option(None, "--launch-cmd", help="Start this server command (measures start-up)"),
    engine: str = typer.Option("other", "--engine", help="With --launch-cmd: vllm|sglang|llamacpp|tgi|speculab|other"),
    ready_timeout: float = typer.Option(600.0, "--ready-timeout", help="With --launch-cmd: seconds to become ready"),
    experiment: str | None = typer.Option(None, "--experiment", help="Take URL/launch, workload, load from this file"),
    api_key: str | None = typer.Option(None, "--api-key", help="Default: $SPECULAB_API_KEY or $OPENAI_API_KEY"),
    timeout: float = typer.Option(600.0, "--timeout", help="Per-request timeout, seconds"),
    include_usage: bool = typer.Option(True, "--include-usage/--no-include-usage", help="stream_options.include_usage"),
    continuous_usage: bool = typer.Option(
        True, "--continuous-usage/--no-continuous-usage", help="stream_options.continuous_usage_stats"
    ),
    extra_body: str | None = typer.Option(None, "--extra-body", help="JSON object merged into every request body"),
    scrape: bool = typer.Option(True, "--scrape/--no-scrape", help="Read the server's /metrics around each phase"),
    max_error_rate: float = _max_error_rate(),
) -> None:
    """Which latency problem is this: cold start, queueing, long prompts (prefill) or generation (decode)?"""
    from speculab.harness.analysis.metrics import error_gate
    from speculab.harness.diagnose.options import diagnose_config_from_flags
    from speculab.harness.diagnose.run import diagnose_interruptible
    from speculab.report.console.diagnosis import print_diagnosis
    from speculab.report.html.diagnosis import write_diagnosis_page

    cfg = diagnose_config_from_flags(dict(locals()), argv=sys.argv)
    console = Console()

    def phase(text: str) -> None:
        err_console.print(f"[dim]{escape(text)}[/]", highlight=False)

    result = diagnose_interruptible(cfg, on_phase=phase)
    if result.run_dir is not None:
        write_diagnosis_page(result.run_dir, result.document)
    print_diagnosis(console, result.document, result.run_dir)
    if result.interrupted:
        err_console.print("interrupted: the diagnosis of the phases that ran is on disk")
        raise typer.Exit(130)
    measured = [r for r in result.records if not r.warmup]
    failed = [r for r in measured if r.error is not None]
    by_cat = Counter(r.error.category.value for r in failed)  # type: ignore[union-attr]
    _check_error_gate(error_gate(len(failed), len(measured), by_cat, max_error_rate), result.run_dir)


# --- run / compare / init / demo: the A/B lifecycle (speculab.harness.experiment) ----------------------------------


def _default_run_dir(stem: str) -> Path:
    from datetime import datetime

    return Path("speculab-runs") / f"{stem}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"


_ALLOW_PYTHON_HELP = "run the workload's `python` checks (they import and run the code they name); off by default"


def _margin() -> Any:
    return typer.Option(None, "--margin", help="smallest change that matters, e.g. 3% (default: the run's, else 3%)")


def _report_options(*, allow_python_checks: bool, max_error_rate: float | None = None, seed: int = 0,
                    margin: str | None = None) -> Any:  # fmt: skip
    from speculab.config.experiment import margins
    from speculab.harness.verdict.correctness import CorrectnessOptions
    from speculab.harness.verdict.model import ReportOptions

    try:
        given = margins(margin) if margin is not None else None
    except ValueError as e:
        raise UserError(f"--margin: {e}") from None
    correctness = CorrectnessOptions(allow_python_checks=allow_python_checks)
    rate = {} if max_error_rate is None else {"max_error_rate": max_error_rate}
    return ReportOptions(seed=seed, correctness=correctness, margin=given, **rate)


def _render(console: Console, out: Path, *, interrupted: bool, options: Any = None) -> Any:
    """summary.json + report.html from what is on disk, then the verdict first."""
    from speculab.report.console.ab import print_ab_report
    from speculab.report.render import render_run_dir

    report = render_run_dir(out, None, options)
    print_ab_report(Console(soft_wrap=True), report, out)
    if interrupted:
        console.print(
            f"[yellow]interrupted:[/] the report covers the part that ran; finish it with `speculab run --resume {out}`"
        )
    return report


def _run_plan(console: Console, plan: Any, out: Path, options: Any = None, resume: bool = False) -> None:
    options = options if options is not None else _report_options(allow_python_checks=False)
    from speculab.harness.experiment.plan import describe_plan
    from speculab.harness.experiment.preflight import size_lines
    from speculab.harness.experiment.run import run_plan_interruptible
    from speculab.report.console.run_progress import RunProgress

    for line in [*describe_plan(plan), *size_lines(plan)]:
        console.print(line, highlight=False)
    console.print(f"results: {out}", highlight=False)
    try:
        outcome = run_plan_interruptible(plan, out, reporter=RunProgress(console), resume=resume)
    except EndpointError:
        # e.g. a launched server exited mid-run: report what finished before the one-line error (exit 3)
        if (out / "inputs.json").is_file():
            with contextlib.suppress(Exception):
                _render(console, out, interrupted=True, options=options)
        raise
    report = _render(console, out, interrupted=outcome.interrupted, options=options)
    if outcome.interrupted:
        raise typer.Exit(130)
    _check_ab_error_gate(report, options, out)


def _check_ab_error_gate(report: Any, options: Any, out: Path) -> None:
    from speculab.harness.verdict.build import report_error_gate

    _check_error_gate(report_error_gate(report, options.max_error_rate), out)


@app.command("run")
def run_command(
    experiment: Path | None = typer.Argument(None, help="experiment file (YAML; `speculab init --url URL` writes one)"),
    output: Path | None = typer.Option(None, "--output", help="results directory (default speculab-runs/NAME-TIME)"),
    resume: Path | None = typer.Option(None, "--resume", help="finish the killed or interrupted run in DIR"),
    allow_extra_diff: bool = typer.Option(
        False, "--allow-extra-diff", help="run even if the candidate differs from the baseline in more than speculation"
    ),
    allow_python_checks: bool = typer.Option(False, "--allow-python-checks", help=_ALLOW_PYTHON_HELP),
    max_model_len: int | None = typer.Option(None, "--max-model-len", min=2, help="Context length (default: detected)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print requests, launches and a timed estimate; run nothing"),
    max_error_rate: float = _max_error_rate(),
) -> None:
    """A/B test: the baseline vs the same server with speculation, same prompts and load; report with intervals."""
    from speculab.config import load_experiment
    from speculab.harness.experiment.plan import plan_experiment
    from speculab.harness.experiment.resume import resume_paths
    from speculab.harness.results.ab_dir import check_ab_output_dir
    from speculab.report.console.ab import print_change

    console = Console(stderr=True, soft_wrap=True)
    experiment, output = resume_paths(resume, experiment, output)  # --resume DIR: DIR and the file it ran
    exp = load_experiment(experiment)
    out = output or _default_run_dir(experiment.stem)
    if resume is None and not dry_run:
        check_ab_output_dir(out)
    plan = plan_experiment(exp, allow_extra_diff=allow_extra_diff, on_change=lambda c: print_change(console, c),
                           max_model_len=max_model_len)  # fmt: skip
    if dry_run:  # only probe requests are sent (docs/experiment.md, "Before a run")
        from speculab.harness.experiment.preflight import dry_run_interruptible, dry_run_lines

        for line in dry_run_lines(dry_run_interruptible(plan)):
            console.print(line, highlight=False)
        return
    options = _report_options(
        allow_python_checks=allow_python_checks or exp.python_checks, max_error_rate=max_error_rate
    )
    _run_plan(console, plan, out, options, resume=resume is not None)


@app.command("compare")
def compare_command(
    dir_a: Path = typer.Argument(..., help="`speculab bench` output: the baseline"),
    dir_b: Path = typer.Argument(..., help="`speculab bench` output: the candidate"),
    output: Path | None = typer.Option(None, "--output", help="report directory (default: compare-A-vs-B)"),
    allow_python_checks: bool = typer.Option(False, "--allow-python-checks", help=_ALLOW_PYTHON_HELP),
    max_error_rate: float = _max_error_rate(),
    margin: str | None = _margin(),
) -> None:
    """Pair two `speculab bench` results per prompt (A = baseline, B = candidate) and write the A/B report."""
    from speculab.harness.experiment.compare import inputs_from_bench_dirs
    from speculab.harness.results.ab_dir import check_ab_output_dir, save_inputs

    console = Console(stderr=True, soft_wrap=True)
    inputs = inputs_from_bench_dirs(dir_a, dir_b)
    out = output or Path(f"compare-{dir_a.name}-vs-{dir_b.name}")
    check_ab_output_dir(out)
    save_inputs(out, inputs)
    options = _report_options(allow_python_checks=allow_python_checks, max_error_rate=max_error_rate, margin=margin)
    _check_ab_error_gate(_render(console, out, interrupted=False, options=options), options, out)


@app.command("init")
def init_command(
    url: str = typer.Option(..., "--url", help="base URL of the running server to look at, e.g. http://host:8000"),
    output: Path = typer.Option(Path("experiment.yaml"), "--output", help="file to write"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing file"),
    minutes: float = typer.Option(10.0, "--minutes", min=0.5, help="size the run to about this long on this server"),
) -> None:
    """Detect the engine behind URL and write a commented starter experiment file."""
    from speculab.harness.experiment.init import write_starter

    look, size = write_starter(url, output, force=force, target_s=minutes * 60)
    console = Console(stderr=True)
    console.print(f"engine: [bold]{look.engine}[/]; wrote {output}", highlight=False)
    if size.estimate_s is not None:
        console.print(f"about {size.estimate_s / 60:.0f} min here ({size.num_prompts} prompts)", highlight=False)
    console.print(f"next: edit it (see the comments), then `speculab run {output}`", highlight=False)


@app.command("demo")
def demo_command(
    output: Path | None = typer.Option(None, "--output", help="results directory (default speculab-runs/demo-TIME)"),
    quick: bool = typer.Option(
        False, "--quick", help="8 prompts of at most 48 tokens: a smoke run, too few for a verdict at concurrency 4"
    ),
    model: str = typer.Option(
        "demo", "--model", help="target model: 'demo' (shipped) or a model directory (a .gguf file for llamacpp)"
    ),
    draft: str = typer.Option(
        "demo-draft", "--draft", help="draft model: 'demo-draft', a directory (.gguf for llamacpp), or 'none'"
    ),
    eagle: str = typer.Option(
        "demo-eagle", "--eagle", help="EAGLE head (speculab's engine): 'demo-eagle', a directory, or 'none'"
    ),
    engine: str = typer.Option(
        "speculab",
        "--engine",
        help="speculab (the embedded engine) or llamacpp (llama-server from scripts/install_llama_server.sh)",
    ),
) -> None:
    """The whole A/B job on the demo models: plain vs n-gram vs draft model vs EAGLE head (speculab or llama.cpp)."""
    from speculab.harness.experiment.demo import DemoConfig, demo_plan
    from speculab.harness.results.ab_dir import check_ab_output_dir
    from speculab.report.console.ab import print_change

    console = Console(stderr=True, soft_wrap=True)
    out = output or _default_run_dir("demo")
    check_ab_output_dir(out)
    none = {"none": None}
    cfg = DemoConfig(
        model=model, draft=none.get(draft, draft), eagle=none.get(eagle, eagle), engine=engine, quick=quick
    )
    plan = demo_plan(cfg)
    for change in plan.changes:
        print_change(console, change)
    _run_plan(console, plan, out)


# --- report: re-render report.html + summary.json of a saved A/B run (speculab run / demo), partial runs too ----


@app.command("report")
def report_command(
    directory: Path = typer.Argument(..., help="output directory of `speculab run` or `speculab demo`"),
    output: Path | None = typer.Option(None, "--output", help="write report.html and summary.json here instead"),
    seed: int = typer.Option(0, "--seed", min=0, help="bootstrap seed (the same seed gives the same intervals)"),
    allow_python_checks: bool = typer.Option(False, "--allow-python-checks", help=_ALLOW_PYTHON_HELP),
    margin: str | None = _margin(),
) -> None:
    """Re-render report.html and summary.json from the inputs saved in DIR, and print the verdict."""
    from speculab.report.console.ab import print_ab_report
    from speculab.report.render import render_run_dir

    options = _report_options(allow_python_checks=allow_python_checks, seed=seed, margin=margin)
    report = render_run_dir(directory, output, options)
    print_ab_report(Console(soft_wrap=True), report, output or directory)


@app.callback()
def _root() -> None:
    """Does speculative decoding make my LLM endpoint faster and cheaper - and is it still correct?"""


def main(argv: list[str] | None = None) -> None:
    """Entry point: usage errors (bad flags) and UserError become one line and a non-zero exit, no traceback."""
    try:
        rc = app(args=argv, standalone_mode=False)
    except NoArgsIsHelpError as e:
        typer.echo(e.ctx.get_help() if e.ctx else str(e))
        sys.exit(0)
    except UsageError as e:
        cmd = e.ctx.command_path if e.ctx else "speculab"
        msg = f"{e.format_message()} (see {cmd} --help)"
        err_console.print(f"[bold red]error:[/] {escape(msg)}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except UserError as e:
        err_console.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        err_console.print("interrupted")
        sys.exit(130)
    sys.exit(rc if isinstance(rc, int) else 0)
