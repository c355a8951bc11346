"""What a `speculab` command loads before it parses its flags. Every command, every mock server and every server a
test launches starts the CLI, so a heavy import there is paid at each start: scipy.stats alone took ~1 s of CPU on the
2-core machine (`speculab version` fell from 2.2 s to 0.9 s once it left the start, 2026-12-06). The heavy libraries
load where a command uses them; this holds the start to that."""

from __future__ import annotations

import subprocess
import sys

# Loaded on first use only: scipy's submodules (the statistics, at analysis time), the engine, plotting, the report's
# templates, the HTTP client, Ray.
HEAVY = ("scipy.stats", "scipy.special", "scipy.optimize", "torch", "matplotlib", "jinja2", "aiohttp", "ray")
# typer's rich help (markdown-it and rich's markdown with it): ~0.13 s of CPU, loaded when a help is rendered
HELP = ("typer.rich_utils", "rich.markdown", "markdown_it")


def _modules_after(statement: str, selected: str) -> list[str]:
    """The modules `m` loaded once `statement` ran in a fresh interpreter, those for which `selected` holds, sorted."""
    probe = f"import sys; {statement}; print(' '.join(sorted(m for m in sys.modules if {selected})))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.split()


def _heavy_after_importing(module: str) -> list[str]:
    """The heavy modules loaded once `module` is imported, in a fresh interpreter."""
    return _modules_after(f"import {module}", f"m in {HEAVY!r} or m.split('.')[0] in {HEAVY!r}")


def test_the_cli_starts_without_the_heavy_libraries() -> None:
    assert _heavy_after_importing("speculab.cli") == []


def test_a_command_starts_without_the_help_renderer_and_help_loads_it() -> None:
    selected = f"m in {HELP!r}"
    assert _modules_after("from speculab.cli import load_commands; load_commands(['run', 'x.yaml'])", selected) == []
    # the help goes to a buffer (the probe prints the modules on stdout); main exits 0 after it
    helped = (
        "import io; from speculab.cli import main; sys.stdout = io.StringIO(); "
        "exec('try: main([\\'run\\', \\'--help\\'])\\nexcept SystemExit: pass'); sys.stdout = sys.__stdout__"
    )
    assert _modules_after(helped, selected) == sorted(HELP)


def test_the_probe_sees_a_heavy_import() -> None:
    """The probe can fail: what a module imports at its top is seen, scipy's lazily loaded submodules too."""
    assert "scipy.stats" in _heavy_after_importing("scipy.stats")


def _loaded_after(argv: list[str]) -> list[str]:
    """The speculab.cli modules and the libraries below loaded once the CLI registered the command `argv` names."""
    below = ("numpy", "scipy", "pydantic", "speculab.harness.servers.adapters", "speculab.config")
    return _modules_after(
        f"from speculab.cli import load_commands; load_commands({argv!r})",
        f"m.startswith('speculab.cli.') or m in {below!r}",
    )


def test_a_command_loads_only_the_module_that_registers_it() -> None:
    """`speculab mock-server` and `serve` start without what `bench` and `run` import (the engines' adapters, the
    experiment schema, numpy, scipy): `speculab mock-server --help` took 0.5-0.7 s of CPU instead of 0.9-1.2 s
    (2026-12-07, the 2-core VM), paid by every mock server and engine a launch-mode run starts."""
    assert _loaded_after(["mock-server", "--port", "0"]) == ["speculab.cli.app", "speculab.cli.help_format",
                                                             "speculab.cli.serve"]  # fmt: skip
    loaded = _loaded_after(["run", "x.yaml"])
    assert "speculab.cli.ab" in loaded and "speculab.cli.measure" not in loaded
    # --help, no command, or a typo (click suggests from all the commands): every module
    for argv in (["--help"], [], ["mock-serve"]):
        assert {"speculab.cli.measure", "speculab.cli.serve", "speculab.cli.ab"} <= set(_loaded_after(argv))


def test_every_command_is_where_the_table_says_in_its_order() -> None:
    import typer

    from speculab.cli import COMMAND_MODULES, app, load_commands

    load_commands()
    registered = {
        c.name or typer.main.get_command_name(c.callback.__name__): c.callback.__module__
        for c in app.registered_commands
    }
    assert registered == {name: f"speculab.cli.{module}" for name, module in COMMAND_MODULES.items()}
    assert list(typer.main.get_command(app).commands) == list(COMMAND_MODULES)  # --help's order
