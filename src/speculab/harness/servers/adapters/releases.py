"""How an engine's installed release says which speculation methods it has (read by `servers.methods`).

A Python engine is asked through its package's source (`PythonRelease`: which files declare its methods and its
speculation config's keys); an executable through its `--help` and `--version` (`HelpRelease`: the parsers of its
own text). `KnownMethods` is speculab's own list for a release, used when the engine cannot be asked (a server
behind a URL), labelled with the release it was checked against.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class PythonRelease:
    """Where a Python engine's package declares its methods: each source is (file inside the package, what declares
    it: `methods.declared.read_declared`'s symbol). Every layout a release may have is listed; what each file found
    declares is joined, in order."""

    package: str  # the import name
    dists: tuple[str, ...]  # distribution names for the version, tried in order
    method_sources: tuple[tuple[str, str], ...]
    option_sources: tuple[tuple[str, str], ...]  # where the keys or flags of its speculation config are
    # method -> the module it imports at start-up that the engine does not depend on (vLLM 0.32's
    # `_validate_suffix_decoding`: "Arctic Inference is required for suffix decoding"): without it the method is a "no"
    requires: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HelpRelease:
    """An executable's own words: the methods its `--help` lists, the speculation flags it has (given the help and
    those methods), the release its `--version` says (None: it says none)."""

    methods: Callable[[str], tuple[str, ...]]
    option_flags: Callable[[str, tuple[str, ...]], tuple[str, ...]]
    release: Callable[[str], str | None]


@dataclass(frozen=True, slots=True)
class KnownMethods:
    """speculab's list of an engine's methods: the release it was read from, where, and the methods."""

    release: str
    where: str
    methods: tuple[str, ...]


def stripped_release(text: str) -> str | None:
    """A `--version` whose whole text is the release."""
    return text.strip() or None
