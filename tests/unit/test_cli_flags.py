"""Each command's flags reach it as one typed record (no `dict(locals())`): the record names every flag the CLI
declares, with the CLI's default, so a flag added to one and not the other, or a default changed in one place only,
fails here."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from speculab.cli import ab, measure, serve
from speculab.commands.bench.options import BenchFlags
from speculab.commands.compare.command import CompareFlags, ReportFlags
from speculab.commands.diagnose.options import DiagnoseFlags
from speculab.commands.methods.command import MethodsFlags
from speculab.commands.run.run import DemoFlags, RunFlags
from speculab.mock.options import MockFlags


def _cli_defaults(command: Callable[..., Any]) -> dict[str, Any]:
    """Parameter -> its typer default (`...`: required)."""
    out = {}
    for name, p in inspect.signature(command).parameters.items():
        default = getattr(p.default, "default", p.default)
        out[name] = tuple(default) if isinstance(default, list) else default
    return out


def _record_defaults(record: type) -> dict[str, Any]:
    return {
        f.name: (f.default if f.default is not dataclasses.MISSING else ...)
        for f in dataclasses.fields(record)  # type: ignore[arg-type]
    }


@pytest.mark.parametrize(
    ("command", "record"),
    [
        (measure.bench, BenchFlags),
        (measure.diagnose, DiagnoseFlags),
        (serve.mock_server, MockFlags),
        (ab.run_command, RunFlags),
        (ab.demo_command, DemoFlags),
        (ab.compare_command, CompareFlags),
        (ab.report_command, ReportFlags),
        (ab.methods_command, MethodsFlags),
    ],
    ids=["bench", "diagnose", "mock-server", "run", "demo", "compare", "report", "methods"],
)
def test_the_flag_record_is_the_cli_s_flags_with_its_defaults(command: Callable[..., Any], record: type) -> None:
    cli, rec = _cli_defaults(command), _record_defaults(record)
    assert list(cli) == list(rec), f"flags differ: {set(cli) ^ set(rec)}"
    differ = {name: (cli[name], rec[name]) for name in cli if cli[name] != rec[name]}
    assert not differ, f"defaults differ (cli, record): {differ}"
    assert dataclasses.fields(record) and record.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_a_record_is_frozen() -> None:
    flags = BenchFlags(url="http://127.0.0.1:9", output=Path("x"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        flags.seed = 1  # type: ignore[misc]


def test_serve_hands_the_engine_its_config_record_with_every_flag() -> None:
    """`speculab serve` builds the engine's `ServeConfig` from its flags (the engine may not import the CLI): every
    field a flag, every default the CLI's (`--dtype auto` is the record's None: the engine picks by device)."""
    pytest.importorskip("torch")
    from speculab.engine.server.launch import ServeConfig

    cli, rec = _cli_defaults(serve.serve), _record_defaults(ServeConfig)
    assert set(cli) == set(rec), f"flags differ: {set(cli) ^ set(rec)}"
    assert cli.pop("dtype") == "auto" and rec.pop("dtype") is None
    differ = {name: (cli[name], rec[name]) for name in cli if cli[name] != rec[name]}
    assert not differ, f"defaults differ (cli, record): {differ}"
