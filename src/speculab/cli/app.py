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
    "Fail (exit 4) when more than this share of requests failed, after writing results, e.g. 5% or 0.05 (default 2%); "
    "cancelled ones do not count"
)


def _error_rate(text: str) -> float:
    """`--max-error-rate` parsed as `--margin` is (`50%` or `0.5`); a bad value is click's one line, in our words."""
    from speculab.config.experiment import parse_error_rate

    try:
        return parse_error_rate(text)
    except ValueError as e:  # typer would prefix a ValueError's words with "Value error, "
        raise typer.BadParameter(str(e)) from None


def _max_error_rate() -> Any:
    from speculab.harness.analysis.metrics import DEFAULT_MAX_ERROR_RATE

    return typer.Option(
        DEFAULT_MAX_ERROR_RATE, "--max-error-rate", parser=_error_rate, metavar="SHARE", help=_MAX_ERROR_HELP
    )


@app.callback()
def _root() -> None:
    """Does speculative decoding make my LLM endpoint faster and cheaper - and is it still correct?"""
