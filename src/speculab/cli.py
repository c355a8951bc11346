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
