"""`FileFields`: one result file's fields checked where they enter, each surprise one line naming the file, the
format and the field (a `UserError`, never a traceback); `error_category`: a failed request's category from what
its tool wrote about it, one rule for every reader.

Every reader's line has one grammar, "<file>: read as <format>: [line N: ]<what is wrong>[; <fix>]", where what is
wrong names the field by its path in the file, in backticks (benchmarks[0].requests, metrics.request_latency.value,
[3].ttft_s in a file that is a list), or says "it" of the whole file or line: "no `ttfts`; write it with ...",
"`itls[2][5]` is 'x', not a number", "line 4: it is a list, not an object". A location is never part of a path.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from speculab.errors import UserError
from speculab.harness.records import ErrorCategory

# the words of a tool's error text (lower case) that name a category
_MALFORMED = ("never received a valid chunk",)  # vLLM's message for a stream with no valid chunk (SGLang's copy too)
_TIMEOUT = ("timeout", "timed out")
# a connection that was made and then lost: asked before "connect", which these contain
_DROPPED = ("disconnect", "closed connection", "connection closed", "reset by peer")
_CONNECT = ("connect",)


def error_category(text: str, answered: bool | None) -> ErrorCategory:
    """A failed request's category from its tool's error text. `answered`: whether the file says the server answered
    with an HTTP status (True: a status or reason phrase; False: an exception in the tool's client, e.g. a traceback;
    None: the file does not tell). An answered request is HTTP whatever its body says, as speculab's own client counts
    it (the connection was made, and a gateway's 504 is an answer, not the client's timeout); otherwise the words
    decide, and a client exception that names none of them is a dropped request."""
    low = text.lower()
    if any(w in low for w in _MALFORMED):
        return ErrorCategory.MALFORMED
    if answered:
        return ErrorCategory.HTTP
    if any(w in low for w in _TIMEOUT):
        return ErrorCategory.TIMEOUT
    if any(w in low for w in _DROPPED):
        return ErrorCategory.DROPPED
    if any(w in low for w in _CONNECT):
        return ErrorCategory.CONNECT
    return ErrorCategory.HTTP if answered is None else ErrorCategory.DROPPED


def _kind(v: Any) -> str:
    """What a JSON (or YAML) value is, for a line saying it is not what was expected."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    return {str: "a string", list: "a list"}.get(type(v), type(v).__name__)


def obj(v: Any) -> dict[str, Any]:
    """`v` where it is an object, else {}: for the optional parts of a file (its dates, its labels)."""
    return v if isinstance(v, dict) else {}


def stated_positive(v: Any) -> float | None:
    """`v` where it is a finite number above 0, else None: for an optional figure of a file's summary (a duration,
    a rate), whose absence means the quantity is not in the file."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
    return float(v) if ok else None


@dataclass(frozen=True, slots=True)
class FileFields:
    """The file being read and what it is read as (e.g. "a GuideLLM benchmarks file")."""

    path: Path
    read_as: str

    def fail(self, what: str) -> NoReturn:
        """One line in the grammar above: `what` is `[line N: ]<what is wrong>[; <fix>]`."""
        raise UserError(f"{self.path}: read as {self.read_as}: {what}")

    def text(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise UserError(f"{self.path}: no such file") from None
        except (OSError, UnicodeDecodeError) as e:  # a directory given with --format, a file it may not read
            self.fail(str(getattr(e, "strerror", None) or e))

    def json(self, text: str, where: str = "") -> Any:
        try:
            return json.loads(text)
        except (ValueError, RecursionError) as e:
            self.fail(f"{where}not JSON ({str(e)[:200]})")

    def mapping(self, v: Any, field: str, at: str = "") -> dict[str, Any]:
        """An object: the field at path `field`, or ("") the whole file or line (`at`: where, e.g. "line 3: ")."""
        if not isinstance(v, dict):
            if not field:
                self.fail(f"{at}it is {_kind(v)}, not an object")
            self.fail(f"{at}no `{field}`" if v is None else f"{at}`{field}` is {_kind(v)}, not an object")
        return v

    def number(self, v: Any, field: str, at: str = "") -> float:
        """A finite number (of the unit the caller knows), else one line naming the field (`at`: where, e.g. a
        line of the file)."""
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            self.fail(f"{at}no `{field}`" if v is None else f"{at}`{field}` is {v!r}, not a number")
        return float(v)

    def positive(self, v: Any, field: str, at: str = "") -> float:
        """A number above 0 (a load: a concurrency, a rate)."""
        x = self.number(v, field, at)
        if x <= 0:
            self.fail(f"{at}`{field}` is {v!r}, not above 0")
        return x

    def count(self, v: Any, field: str, at: str = "") -> int | None:
        """A token count (None where the file has none)."""
        if v is None:
            return None
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            self.fail(f"{at}`{field}` is {v!r}, not a token count")
        return v

    def request_lists(
        self, d: Mapping[str, Any], keys: Sequence[str], count_key: str, fix: str
    ) -> dict[str, list[Any]]:
        """The per-request lists of a file that keeps one list per field and one entry per request (vLLM's
        `bench serve`, SGLang's `bench_serving`, which took vLLM's layout): each of `keys` present, a list, and as
        long as `count_key`'s; `generated_texts` kept where it has that length, else empty texts. One line naming
        the first that is not (`fix`: how to write the file so that it has them)."""
        out: dict[str, list[Any]] = {}
        for key in keys:
            v = d.get(key)
            if v is None:
                self.fail(f"no `{key}`; {fix}")
            if not isinstance(v, list):
                self.fail(f"`{key}` is not a list")
            out[key] = v
        n = len(out[count_key])
        for key, v in out.items():
            if len(v) != n:
                self.fail(f"`{key}` has {len(v)} entries, `{count_key}` {n}")
        if n == 0:
            self.fail("it holds no requests")
        texts = d.get("generated_texts")
        out["generated_texts"] = texts if isinstance(texts, list) and len(texts) == n else [""] * n
        return out
