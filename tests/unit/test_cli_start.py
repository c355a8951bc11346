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


def _heavy_after_importing(module: str) -> list[str]:
    """The heavy modules loaded once `module` is imported, in a fresh interpreter."""
    probe = (
        f"import sys, {module}; "
        f"print(' '.join(sorted(m for m in sys.modules if m in {HEAVY!r} or m.split('.')[0] in {HEAVY!r})))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.split()


def test_the_cli_starts_without_the_heavy_libraries() -> None:
    assert _heavy_after_importing("speculab.cli") == []


def test_the_probe_sees_a_heavy_import() -> None:
    """The probe can fail: what a module imports at its top is seen, scipy's lazily loaded submodules too."""
    assert "scipy.stats" in _heavy_after_importing("scipy.stats")
