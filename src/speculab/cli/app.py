"""The typer app and what every command's flags share (the error-rate option, the fit help, the error console);
the command modules register on `app`, and `speculab.cli` puts them together with `main`."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console

import speculab.cli.help_format  # noqa: F401 - switches in --help show no "<bool>" (help_format.py says why)
from speculab import NAME, __version__

app = typer.Typer(
    name=NAME,
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


# --- commands are registered in cli/measure.py, cli/serve.py and cli/ab.py, one block each ---
# A command's parameters are its flags (typer declares one per line), so the long signatures below are
# declarations, not logic: each body parses, calls one library function, prints, and maps the outcome to an exit code.

_FIT_HELP = "Prompts that cannot fit the context with max_tokens: skip (leave out) | cap (lower max_tokens) | refuse"
_MAX_ERROR_HELP = (
    "Fail (exit 4) when more than this share of requests failed, after writing results; cancelled ones do not count"
)


def _max_error_rate() -> Any:
    from speculab.harness.analysis.metrics import DEFAULT_MAX_ERROR_RATE

    return typer.Option(DEFAULT_MAX_ERROR_RATE, "--max-error-rate", min=0.0, max=1.0, help=_MAX_ERROR_HELP)


@app.callback()
def _root() -> None:
    """Does speculative decoding make my LLM endpoint faster and cheaper - and is it still correct?"""
