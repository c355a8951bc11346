"""JSON -> dataclass, driven by type hints, so summary.json and the saved records round-trip without hand code.

The way out is the harness's one strict-JSON writer (`speculab.harness.results.strict_json.json_safe`: NaN and
infinities become null, enums their values); the way back turns null into NaN for float fields, Optional fields
keep None, and a record an older release saved as a sentence (a warning) becomes the record of that text.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import math
import types
import typing
from enum import Enum
from functools import cache
from typing import Any, Union


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_data(tp: Any, data: Any) -> Any:
    """Plain data -> an instance of `tp` (a dataclass, tuple[...], dict[str, ...], Optional, or a scalar)."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if data is None:
            return None
        if data == "" and any(hasattr(a, "from_text") for a in args):
            return None  # a record an older release saved as its sentence, and "" where there was none to say
        if len(args) == 1:
            return from_data(args[0], data)
        for a in args:  # e.g. float | str: first that fits
            try:
                return from_data(a, data)
            except (TypeError, ValueError):
                continue
        return data
    if tp is float:
        return math.nan if data is None else float(data)
    if tp in (int, str, bool):
        return data
    if tp is Any:
        return data
    if isinstance(tp, type) and issubclass(tp, Enum):
        return tp(data)
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_data(args[0], x) for x in data)
        return tuple(from_data(a, x) for a, x in zip(args, data, strict=True))
    if origin in (dict, collections.abc.Mapping) or tp is dict:
        args = typing.get_args(tp)
        vt = args[1] if len(args) == 2 else Any
        return {k: from_data(vt, v) for k, v in data.items()}
    if origin is list:
        (et,) = typing.get_args(tp)
        return [from_data(et, x) for x in data]
    if dataclasses.is_dataclass(tp):
        if isinstance(data, str) and hasattr(tp, "from_text"):  # a record an older release saved as its sentence
            return tp.from_text(data)
        hints = _hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in data:
                kwargs[f.name] = from_data(hints[f.name], data[f.name])
        return tp(**kwargs)
    return data
