"""`--help` a person can read, for every command; imported by cli/app.py, which is all it takes (the hooks go in when
the first help is rendered: a command that runs never imports typer's rich help).

Two fixes to typer's rich help panel (0.20 and later):
- no type beside a switch: typer printed an option's `display_type_rich` for every option, switches included, so
  `--quick` read `--quick <bool>` as if it took a value (click's own help prints no type for a flag);
- the description gets the width the switches leave: typer laid the options out in seven columns that all wrap, and
  rich shrinks the widest wrapping column first, down to the next widest; one long negative switch
  (`--no-continuous-usage`) held a column of its own, so every description was squeezed to ~22 characters and
  `bench --help` ran to 145 lines at 100 columns. Here the switches (a negative one under its positive when the two
  do not fit one line), the type and the required mark keep their natural width, and the description takes the rest.
"""

from __future__ import annotations

import inspect
from typing import Any

try:
    from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
except ImportError:  # pragma: no cover - a typer without them renders help its own way
    TyperOption = TyperArgument = TyperCommand = TyperGroup = None  # type: ignore[assignment,misc]

# typer's rich help and the rich pieces used here, imported when help is first rendered (`_install`): together
# ~0.13 s of CPU (markdown-it and rich's markdown come with typer.rich_utils) that a command run never needs, paid by
# every `speculab` process otherwise (the mock servers and engines a run launches among them)
_rich_utils: Any = None
Panel: Any = None
Table: Any = None
Text: Any = None

# a switch and its negative on one line up to this width (`--stream/--no-stream`), else the negative goes under it
SWITCH_LINE = 24


def _no_type_for_switches(self: Any, ctx: Any) -> str | None:
    """A switch (`--quick`, `--stream/--no-stream`, a count) takes no value: no type to show."""
    return None if self.is_flag or self.count else _display_type(self, ctx)


def _names(param: Any) -> Text:
    """The switches of one option (`--output, -o`; a negative one beside or under them), or an argument's name."""
    if isinstance(param, TyperArgument):
        names = [param.display_name_raw + ("..." if param.metavar is None and param.nargs != 1 else "")]
        return _rich_utils.highlighter(Text(names[0]))
    longs = sorted(param.opts, key=lambda o: not o.startswith("--"))  # `--output, -o`: the long form first
    line = ", ".join(longs)
    negative = ", ".join(sorted(param.secondary_opts, key=lambda o: not o.startswith("--")))
    text = _rich_utils.highlighter(Text(line))
    if negative:
        sep = "/" if len(line) + 1 + len(negative) <= SWITCH_LINE else "\n"
        text.append(sep)
        text.append_text(_rich_utils.negative_highlighter(Text(negative)))
    return text


def _type(param: Any, ctx: Any) -> Text:
    """What value the option takes (`<float>`), with its range on the line below (`[0.0<=x<=1.0]`)."""
    text = Text(style=_rich_utils.STYLE_TYPES)
    shown = param.display_type_rich(ctx=ctx)
    if shown is not None:
        text.append(shown)
    range_help = getattr(param, "_get_number_range_help_str", lambda: "")()
    if range_help:
        text.append(("\n" if shown else "") + f"[{range_help}]")
    return _rich_utils.types_highlighter(text)


def _options_panel(*, name: str, params: list[Any], ctx: Any, markup_mode: Any, console: Any) -> None:
    """One panel of options: required mark, switches and type at their natural width, the description the rest."""
    if not params:
        return
    required = any(getattr(p, "required", False) for p in params)
    table = Table(highlight=True, show_header=False, expand=True, box=None, pad_edge=False, padding=(0, 1))
    if required:
        table.add_column(no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(ratio=1)  # the only column that wraps: it takes what the others leave
    for p in params:
        mark = [Text(_rich_utils.REQUIRED_SHORT_STRING, style=_rich_utils.STYLE_REQUIRED_SHORT) if p.required else ""]
        help_text = _rich_utils._get_parameter_help(param=p, ctx=ctx, markup_mode=markup_mode)
        table.add_row(*(mark if required else []), _names(p), _type(p, ctx), help_text)
    panel = Panel(
        table,
        border_style=_rich_utils.STYLE_OPTIONS_PANEL_BORDER,
        title=name,
        title_align=_rich_utils.ALIGN_OPTIONS_PANEL,
    )
    console.print(panel)


def _typer_lays_out_options_as_expected() -> bool:
    """The hooks above rest on typer's rich help internals: install them only where those are the ones known."""
    if TyperOption is None or not hasattr(TyperOption, "display_type_rich"):
        return False
    needed = ("_print_options_panel", "_get_parameter_help", "highlighter", "negative_highlighter", "types_highlighter")
    if not all(hasattr(_rich_utils, n) for n in needed):
        return False
    params = set(inspect.signature(_rich_utils._print_options_panel).parameters)
    return params == {"name", "params", "ctx", "markup_mode", "console"}


def _install() -> None:
    """Import typer's rich help and put the hooks above in, once, before the first help is rendered."""
    global _rich_utils, Panel, Table, Text, _display_type
    if _rich_utils is not None:
        return
    import typer.rich_utils
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    _rich_utils = typer.rich_utils
    if _typer_lays_out_options_as_expected():
        _display_type = TyperOption.display_type_rich
        TyperOption.display_type_rich = _no_type_for_switches  # type: ignore[method-assign]
        _rich_utils._print_options_panel = _options_panel


def _installed_first(cls: Any) -> None:
    """Every help typer renders goes through its command's or group's `format_help`: the hooks go in there."""
    format_help = cls.format_help

    def installed_then_formatted(self: Any, ctx: Any, formatter: Any) -> None:
        _install()
        return format_help(self, ctx, formatter)

    cls.format_help = installed_then_formatted


if TyperCommand is not None:
    _installed_first(TyperCommand)
    _installed_first(TyperGroup)
