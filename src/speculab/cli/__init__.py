"""argv -> a typed flag record -> a command -> exit code. Nothing else lives here.

Each typer function declares its flags, hands them as one record to its command (`speculab.commands`) with a screen
that presents through `speculab.report`, and `main` maps the errors a command raises to one line and an exit code.
The typer app and what every command shares are in `app.py`; the commands' flags live by what they do: `measure` (bench,
workload, diagnose), `serve` (serve, mock-server), `ab` (run, compare, init, methods, demo, report).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import typer
from rich.markup import escape

from speculab import NAME
from speculab.cli.app import app, err_console
from speculab.errors import UserError, disk_error

try:  # typer >= 0.20 vendors its own click
    from typer._click.exceptions import NoArgsIsHelpError, UsageError
except ImportError:  # pragma: no cover - older typer on real click
    from click.exceptions import NoArgsIsHelpError, UsageError


# The module that registers each command on `app` (cli/app.py), in the order `--help` lists them. A process imports
# only the module of the command it runs: `speculab serve` and `mock-server` need none of what `bench` and `run`
# import (the engines' adapters, pydantic's experiment schema, numpy, scipy).
COMMAND_MODULES: dict[str, str] = {
    "version": "app",
    "bench": "measure",
    "workload": "measure",
    "diagnose": "measure",
    "serve": "serve",
    "mock-server": "serve",
    "run": "ab",
    "predict": "ab",
    "compare": "ab",
    "init": "ab",
    "methods": "ab",
    "demo": "ab",
    "report": "ab",
}


def load_commands(argv: Sequence[str] = ()) -> None:
    """Register the command `argv` names, or every command where it names none (`--help`, or a typo that click
    answers with the commands it knows), listed in `COMMAND_MODULES`' order whatever was imported first."""
    named = COMMAND_MODULES.get(argv[0]) if argv else None
    for module in [named] if named else dict.fromkeys(COMMAND_MODULES.values()):
        importlib.import_module(f"speculab.cli.{module}")
    order = {name: i for i, name in enumerate(COMMAND_MODULES)}
    app.registered_commands.sort(key=lambda c: order.get(c.name or typer.main.get_command_name(c.callback.__name__), 0))


def main(argv: list[str] | None = None) -> None:
    """Entry point: usage errors (bad flags) and UserError become one line and a non-zero exit, no traceback."""
    load_commands(sys.argv[1:] if argv is None else argv)
    try:
        rc = app(args=argv, standalone_mode=False)
    except NoArgsIsHelpError as e:
        typer.echo(e.ctx.get_help() if e.ctx else str(e))
        sys.exit(0)
    except UsageError as e:
        cmd = e.ctx.command_path if e.ctx else NAME
        msg = f"{e.format_message()} (see {cmd} --help)"
        err_console.print(f"[bold red]error:[/] {escape(msg)}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except UserError as e:
        from speculab.report.console.exit import error_line  # a failed gate's records, in the report's words

        err_console.print(f"[bold red]error:[/] {escape(error_line(e))}", highlight=False, soft_wrap=True)
        sys.exit(e.exit_code)
    except OSError as e:  # a full disk, from whichever writer met it first: one line, exit 2 (errors.disk_error)
        if (why := disk_error(e)) is None:
            raise
        err_console.print(f"[bold red]error:[/] {escape(str(why))}", highlight=False, soft_wrap=True)
        sys.exit(why.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        err_console.print("interrupted")
        sys.exit(130)
    sys.exit(rc if isinstance(rc, int) else 0)


__all__ = ["COMMAND_MODULES", "app", "load_commands", "main"]
