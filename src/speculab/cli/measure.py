"""`speculab bench | workload | diagnose`: measure one endpoint, load a workload, say what its latency is made of."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape

from speculab.cli.app import _FIT_HELP, _max_error_rate, app, err_console
from speculab.harness.servers.adapters import engine_kinds


@app.command()
def bench(  # long: one line per flag (typer reads the signature), then the typed record they make
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
    from speculab.commands.bench.command import bench_command
    from speculab.commands.bench.options import BenchFlags

    flags = BenchFlags(
        url=url,
        output=output,
        model=model,
        api=api,
        workload=workload,
        num_prompts=num_prompts,
        concurrency=concurrency,
        rate=rate,
        trace_speed=trace_speed,
        workers=workers,
        ray=ray,
        arrival=arrival,
        burstiness=burstiness,
        duration=duration,
        warmup=warmup,
        ramp_up=ramp_up,
        max_tokens=max_tokens,
        fit=fit,
        max_model_len=max_model_len,
        temperature=temperature,
        top_p=top_p,
        seed=seed,
        ignore_eos=ignore_eos,
        stream=stream,
        timeout=timeout,
        include_usage=include_usage,
        continuous_usage=continuous_usage,
        logprobs=logprobs,
        extra_body=extra_body,
        api_key=api_key,
        tokenizer=tokenizer,
        slo_ttft=slo_ttft,
        slo_tpot=slo_tpot,
        slo_e2e=slo_e2e,
        stall_threshold=stall_threshold,
        stall_k=stall_k,
        scrape=scrape,
        max_error_rate=max_error_rate,
    )
    if bench_command(flags, _BenchScreen()).interrupted:
        err_console.print("interrupted: results of the part that ran are on disk")
        raise typer.Exit(130)


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


# --- diagnose: which latency problem is this (cold start, queueing, prefill, decode)? ---------------------------


@app.command()
def diagnose(  # long: one line per flag (typer reads the signature), then the typed record they make
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
    engine: str = typer.Option("other", "--engine", help=f"With --launch-cmd: {'|'.join(engine_kinds())}"),
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
    from speculab.commands.diagnose.command import diagnose_command
    from speculab.commands.diagnose.options import DiagnoseFlags

    flags = DiagnoseFlags(
        url=url,
        output=output,
        model=model,
        api=api,
        workload=workload,
        num_prompts=num_prompts,
        concurrency=concurrency,
        trace_speed=trace_speed,
        workers=workers,
        ray=ray,
        max_tokens=max_tokens,
        temperature=temperature,
        seed=seed,
        ignore_eos=ignore_eos,
        max_model_len=max_model_len,
        max_prompt_tokens=max_prompt_tokens,
        sweep_points=sweep_points,
        sweep_repeats=sweep_repeats,
        idle=idle,
        prefix_tokens=prefix_tokens,
        probe_seed=probe_seed,
        launch_cmd=launch_cmd,
        engine=engine,
        ready_timeout=ready_timeout,
        experiment=experiment,
        api_key=api_key,
        timeout=timeout,
        include_usage=include_usage,
        continuous_usage=continuous_usage,
        extra_body=extra_body,
        scrape=scrape,
        max_error_rate=max_error_rate,
    )
    if diagnose_command(flags, _DiagnoseScreen()).interrupted:
        err_console.print("interrupted: the diagnosis of the phases that ran is on disk")
        raise typer.Exit(130)


class _BenchScreen:
    """`speculab bench`'s progress bar and summary, with the report package (the command's `BenchScreen`)."""

    def __init__(self) -> None:
        self.console = Console()

    @contextmanager
    def progress(self) -> Iterator[Any]:
        from speculab.report.console.bench import BenchProgress

        with BenchProgress(self.console) as bar:
            yield bar.update

    def summary(self, summary: dict[str, Any], run_dir: Path) -> None:
        from speculab.report.console.bench import print_bench_summary

        print_bench_summary(self.console, summary, run_dir)


class _DiagnoseScreen:
    """`speculab diagnose`'s phases and diagnosis (its page written beside diagnosis.json), with the report package."""

    def __init__(self) -> None:
        self.console = Console()

    def phase(self, text: str) -> None:
        err_console.print(f"[dim]{escape(text)}[/]", highlight=False)

    def diagnosis(self, document: dict[str, Any], run_dir: Path | None) -> None:
        from speculab.report.console.diagnosis import print_diagnosis
        from speculab.report.html.diagnosis import write_diagnosis_page

        if run_dir is not None:
            write_diagnosis_page(run_dir, document)
        print_diagnosis(self.console, document, run_dir)
