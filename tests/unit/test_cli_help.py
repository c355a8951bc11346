"""`--help` names each switch without a type: `--quick`, not `--quick <bool>` (issue 24: it read as taking a value)."""

from __future__ import annotations

import pytest

from fakes.cli_runner import run_main


def test_switches_show_no_type_and_options_keep_theirs(capsys):
    code, out, _ = run_main(capsys, "demo", "--help")
    assert code == 0
    assert "<bool>" not in out and "--quick" in out
    assert "--model" in out and "<str>" in out  # an option that takes a value still says what kind
    code, out, _ = run_main(capsys, "bench", "--help")
    assert code == 0 and "<bool>" not in out and "--no-stream" in out


def _commands() -> list[tuple[str, int]]:
    """Every command with the number of its parameters (options and arguments, --help included)."""
    import typer

    from speculab.cli import app, load_commands

    load_commands()
    group = typer.main.get_command(app)
    return [(name, len(cmd.params) + 1) for name, cmd in group.commands.items()]  # +1: --help


@pytest.mark.parametrize(("command", "n_params"), _commands())
def test_help_gives_descriptions_the_width_the_switches_leave(capsys, monkeypatch, command, n_params):
    """Issue 36 item 9: at 100 columns one long switch (`--no-continuous-usage`) squeezed every description of
    `bench --help` into a 22-character column: 145 lines. The description starts by column 50, and the panels take
    at most two and a half lines a parameter (bench's took three)."""
    monkeypatch.setenv("COLUMNS", "100")
    code, out, _ = run_main(capsys, command, "--help")
    assert code == 0
    lines = out.splitlines()
    assert all(len(ln) <= 100 for ln in lines), out
    help_row = next(ln for ln in lines if "--help" in ln and "Show this message" in ln)
    assert help_row.index("Show this message") <= 50, out
    panel = [ln for ln in lines if ln.startswith("│")]
    assert len(panel) <= 2.5 * n_params, f"{len(panel)} lines for {n_params} parameters:\n{out}"
