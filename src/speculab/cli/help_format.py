"""`--help` without a type beside each switch. Typer's rich help panel (0.20 and later) prints an option's
`display_type_rich` for every option, switches included, so `--quick` read `--quick <bool>` as if it took a value;
click's own help prints no type for a flag. Importing this module (cli/__init__.py does) makes a flag show none."""

from __future__ import annotations

from typing import Any

try:
    from typer.core import TyperOption
except ImportError:  # pragma: no cover - a typer without it renders help its own way
    TyperOption = None  # type: ignore[assignment,misc]

if TyperOption is not None and hasattr(TyperOption, "display_type_rich"):
    _display_type = TyperOption.display_type_rich

    def _no_type_for_switches(self: Any, ctx: Any) -> str | None:
        """A switch (`--quick`, `--stream/--no-stream`, a count) takes no value: no type to show."""
        return None if self.is_flag or self.count else _display_type(self, ctx)

    TyperOption.display_type_rich = _no_type_for_switches  # type: ignore[method-assign]
