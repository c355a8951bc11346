"""Dataclass <-> JSON for the report model, driven by type hints so summary.json round-trips without hand code.

NaN and infinities become null on the way out (summary.json is strict JSON) and NaN on the way back into float
fields; Optional fields keep None. Enums are written as their values.
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


def to_data(obj: Any) -> Any:
    """A dataclass tree -> plain JSON-ready data (dicts, lists, numbers, strings, None)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_data(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): to_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_data(v) for v in obj]
    return obj


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
        hints = _hints(tp)
        kwargs = {}
        for f in dataclasses.fields(tp):
            if f.name in data:
                kwargs[f.name] = from_data(hints[f.name], data[f.name])
        return tp(**kwargs)
    return data
