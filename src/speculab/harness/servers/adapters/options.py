"""`speculation.options` as an engine's own flags, for the engines whose speculation config is flags (SGLang's
`--speculative-*`, llama.cpp's `--spec-*`); vLLM and speculab take them as `--speculative-config` JSON keys instead.

A key is the flag's name without its prefix, in either spelling (`eagle_topk` or `eagle-topk` -> SGLang's
`--speculative-eagle-topk`; the whole flag name is accepted too). A value is written as the flag's argument; `true` is
a bare switch; a list is the flag's several arguments; `false` and `null` are refused (an off switch is left out, or
given by its own `no-` flag), since a flag engine has no way to say "false" for a switch. Whether the engine's release
has the flag is checked at plan time against the flags it declares (methods.here.check_methods), not here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from speculab.errors import UserError


def flag_name(key: str, prefix: str) -> str:
    """`eagle_topk` -> `--speculative-eagle-topk` (prefix `--speculative-`); a key already spelled as the flag, with
    or without its dashes (`speculative_eagle_topk`, `--speculative-eagle-topk`), is the same flag."""
    name = key.strip().lstrip("-").replace("_", "-")
    bare = prefix.lstrip("-")
    return f"--{name}" if name.startswith(bare) or name.startswith(f"no-{bare}") else f"{prefix}{name}"


def _values(key: str, value: Any) -> list[str]:
    if value is True:
        return []
    if value is False or value is None:
        raise UserError(
            f"speculation.options.{key}: {json.dumps(value)} cannot be passed as a flag; leave the key out for the "
            "engine's default (or give the switch's own no- flag)"
        )
    if isinstance(value, list):
        return [json.dumps(v) if isinstance(v, (dict, list)) else str(v) for v in value]
    return [json.dumps(value, separators=(",", ":")) if isinstance(value, dict) else str(value)]


def option_flags(
    options: Mapping[str, Any], prefix: str, owned: Mapping[str, str], derived: Mapping[str, list[str]]
) -> tuple[list[str], dict[str, list[str]]]:
    """The options as flags, and what is left of the adapter's `derived` companion flags (flag -> its values) once
    an option has replaced one of them. `owned` maps a flag that one of the speculation entry's own keys sets to
    that key: an option naming it is refused, so one setting has one place."""
    flags: list[str] = []
    left = dict(derived)
    for key, value in options.items():
        flag = flag_name(key, prefix)
        if flag in owned:
            raise UserError(
                f"speculation.options.{key}: {flag} is set by speculation.{owned[flag]}; remove it from options"
            )
        left.pop(flag, None)
        flags += [flag, *_values(key, value)]
    return flags, left


def flatten(flags: Mapping[str, list[str]]) -> list[str]:
    """{flag: values} -> argv words, in the mapping's order."""
    return [w for flag, values in flags.items() for w in (flag, *values)]
