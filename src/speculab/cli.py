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
