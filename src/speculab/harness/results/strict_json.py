"""Strict JSON for everything speculab writes: NaN and infinities become null, so every file parses anywhere.

`json_safe` turns a tree of dataclasses, enums, mappings, sequences and scalars into plain JSON data (tuples as
lists, keys as strings); `write_json_atomic` writes it with `atomic_file.write_atomic`, so a reader never sees half
a file.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

from speculab.harness.results.atomic_file import write_atomic


def json_safe(obj: Any) -> Any:
    """Plain, strict-JSON data: NaN/inf -> None, dataclasses -> dicts, enums -> values, tuples -> lists."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Enum):
        return json_safe(obj.value)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: json_safe(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def dumps(obj: Any, *, indent: int | None = None) -> str:
    """`json_safe(obj)` as strict JSON text (non-ASCII kept: model output is mostly not ASCII-only)."""
    return json.dumps(json_safe(obj), indent=indent, ensure_ascii=False, allow_nan=False)


def write_json_atomic(path: Path, obj: Any, *, indent: int | None = 2) -> None:
    """Write `obj` as strict JSON to `path`, atomically (`atomic_file.write_atomic`)."""
    write_atomic(path, dumps(obj, indent=indent) + "\n")
