"""argv -> config -> library call -> exit code. Nothing else lives here.

Each command parses and validates its flags, calls one library function, prints through
`speculab.report.console`, and maps `UserError` to a one-line message and an exit code.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from speculab import __version__
from speculab.errors import UserError

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


# --- workload: list the built-in sets, or load and check a workload without sending anything ---------------------


@app.command("workload")
def workload_command(
    spec: str = typer.Argument(
        "", help="builtin:NAME, PATH.jsonl, jsonl:PATH, sharegpt:PATH or synthetic:input=N,output=N; omit to list"
    ),
    num_prompts: int = typer.Option(0, "--num-prompts", min=0, help="take (or cycle to) this many requests; 0: all"),
    api: str = typer.Option("completions", "--api", help="completions or chat: how prompts are rendered"),
    seed: int = typer.Option(0, "--seed", min=0, help="run seed: per-request seeds and synthetic text"),
    show: int = typer.Option(0, "--show", min=0, help="also print the first N requests"),
) -> None:
    """List the built-in workloads, or load one (reporting any problem by file and line) and summarize it."""
    from rich.markup import escape
    from rich.table import Table

    from speculab.bench.workload import item_text, list_builtin, load_workload, workload_overview

    console = Console(soft_wrap=True)
    if not spec:
        table = Table("workload", "kind", "items", "description", title="built-in workloads (--workload builtin:NAME)")
        for b in list_builtin():
            table.add_row(f"builtin:{b.name}", b.kind, str(b.count), b.description)
        console.print(table)
        return
    wl = load_workload(spec, seed=seed, num_prompts=num_prompts or None, api=api)
    o = workload_overview(wl)
    p, m = o["prompt_tokens_approx"], o["max_tokens"]
    console.print(f"[bold]{o['name']}[/]: {o['items']} requests ({o['distinct_prompts']} distinct prompts)")
    console.print(f"source: {o['source']}", highlight=False)
    console.print(f"categories: {', '.join(f'{k} {v}' for k, v in o['categories'].items())}", highlight=False)
    console.print(
        f"prompt length (approx. tokens): mean {p['mean']:.0f}, p50 {p['p50']:.0f}, p90 {p['p90']:.0f}, "
        f"max {p['max']:.0f}"
    )
    if o["items_with_max_tokens"]:
        console.print(
            f"max_tokens set on {o['items_with_max_tokens']} requests: mean {m['mean']:.0f}, p50 {m['p50']:.0f}, "
            f"max {m['max']:.0f}"
        )
    checks = ", ".join(f"{k} {v}" for k, v in o["check_types"].items()) or "none"
    console.print(f"checks on {o['items_with_checks']} requests ({checks})")
    for item in wl.items[:show]:
        text = item_text(item)
        clipped = text if len(text) <= 300 else text[:297] + "..."
        console.rule(escape(f"#{item.index} {item.prompt_id} [{item.category or '-'}] seed {item.seed}"), style="dim")
        console.print(clipped, highlight=False, markup=False)


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
    max_num_batched_tokens: int | None = typer.Option(None, help="Token budget per engine step (default: 2048)."),
    max_waiting: int = typer.Option(256, help="Waiting-queue bound; beyond it requests get HTTP 429."),
    dtype: str = typer.Option("auto", help="auto (float32 on CPU, bfloat16 on CUDA), float32, bfloat16, float16."),
    device: str = typer.Option("auto", help="auto, cpu, cuda, cuda:N."),
    api_key: str | None = typer.Option(None, help="Require 'Authorization: Bearer KEY' on /v1/*."),
    served_model_name: str | None = typer.Option(None, help="Model name clients send (default: MODEL as given)."),
    seed: int = typer.Option(0, help="Seed for requests that do not send their own."),
    speculative_config: str | None = typer.Option(
        None,
        help='Speculative decoding, vLLM-style JSON: \'{"method":"ngram","num_speculative_tokens":4}\' or '
        '\'{"method":"draft_model","model":"DIR|demo-draft","num_speculative_tokens":4}\' (docs/speculative.md).',
    ),
) -> None:
    """Serve a model with speculab's reference engine (OpenAI API, continuous batching, Prometheus /metrics)."""
    try:
        from speculab.engine.server.launch import ServeConfig
        from speculab.engine.server.launch import serve as run_server
    except ImportError as e:
        raise UserError(
            f"speculab serve needs the engine extra ({e.name} is missing): pip install 'speculab[engine]'"
        ) from None
    cfg = ServeConfig(
        model=model,
        host=host,
        port=port,
        max_num_seqs=max_num_seqs,
        max_model_len=max_model_len,
        max_num_batched_tokens=max_num_batched_tokens,
        max_waiting=max_waiting,
        dtype=None if dtype == "auto" else dtype,
        device=device,
        api_key=api_key,
        served_model_name=served_model_name,
        seed=seed,
        speculative_config=speculative_config,
    )

    def ready(url: str) -> None:
        err_console.print(
            f"speculab engine ready: {url}/v1 (model {cfg.served_model_name or model!r})", highlight=False
        )

    run_server(cfg, on_ready=ready)


@app.callback()
def _root() -> None:
    """Does speculative decoding make my LLM endpoint faster and cheaper - and is it still correct?"""


def main(argv: list[str] | None = None) -> None:
    """Entry point: click handles usage errors (exit 2); UserError becomes one line and its exit code."""
    try:
        app(args=argv)
    except UserError as e:
        err_console.print(f"[bold red]error:[/] {e}", highlight=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
