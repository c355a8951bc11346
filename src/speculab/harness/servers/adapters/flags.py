"""Server command lines as flag -> values, and the exact difference between two of them.

A command is parsed into its positional arguments (program, subcommand, model path: order matters) and its flags
(order does not). `--key value`, `--key=value` and a bare `--switch` are understood; a repeated flag keeps all its
values in order. One ambiguity is inherent to argv: a bare switch followed by a positional (`--enforce-eager MODEL`)
reads as a flag with a value; both arms are parsed the same way, so a diff is still exact unless that order changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

POSITIONAL = "<positional>"
REDACTED = "***"
# Flags whose value is a credential, in every engine's spelling (vLLM/SGLang/speculab --api-key, vLLM --hf-token,
# llama.cpp --api-key, TGI --api-key, --auth-token, --openai-api-key, ...): the last word of the flag says so.
# Plural words do not match, so --max-num-batched-tokens and --num-speculative-tokens are never hidden.
_SECRET_FLAG = re.compile(r"--?(?:[a-z0-9]+[-_])*(?:api[-_]?key|key|token|secret|password|passwd|credentials?)", re.I)


def is_secret_flag(flag: str) -> bool:
    """True for a flag that carries a key, token, secret or password."""
    return bool(_SECRET_FLAG.fullmatch(flag))


def redact_command(argv: Sequence[str]) -> tuple[str, ...]:
    """The command with every secret flag's value replaced by `***` (`--api-key K` and `--api-key=K` alike): the
    form in which a command is written to any file or printed. Launching still uses the real command."""
    out: list[str] = []
    hide_next = False
    for a in argv:
        if hide_next and not _is_flag(a):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        key, eq, _ = a.partition("=")
        if _is_flag(a) and is_secret_flag(key):
            if eq:
                out.append(f"{key}={REDACTED}")
            else:
                out.append(a)
                hide_next = True
            continue
        out.append(a)
    return tuple(out)


def _is_flag(token: str) -> bool:
    if not token.startswith("-") or token in ("-", "--"):
        return False
    try:
        float(token)  # "-1" is a value (e.g. `--top-k -1`), not a flag
        return False
    except ValueError:
        return True


@dataclass(frozen=True, slots=True)
class ParsedCommand:
    positionals: tuple[str, ...]
    flags: Mapping[str, tuple[str | None, ...]]  # flag -> its values in order (None for a bare switch)


def parse_command(argv: Sequence[str], aliases: Mapping[str, str] | None = None) -> ParsedCommand:
    """Split argv into positionals and flags; `aliases` maps short/alternate spellings to one canonical flag."""
    aliases = aliases or {}
    positionals: list[str] = []
    flags: dict[str, list[str | None]] = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        if _is_flag(tok):
            key, eq, val = tok.partition("=")
            value: str | None = val if eq else None
            if not eq and i + 1 < len(argv) and not _is_flag(argv[i + 1]):
                value = argv[i + 1]
                i += 1
            flags.setdefault(aliases.get(key, key), []).append(value)
        else:
            positionals.append(tok)
        i += 1
    return ParsedCommand(tuple(positionals), {k: tuple(v) for k, v in flags.items()})


@dataclass(frozen=True, slots=True)
class FlagDifference:
    flag: str  # POSITIONAL for a change in the positional arguments
    baseline: tuple[str | None, ...] | None  # None: absent from the baseline
    candidate: tuple[str | None, ...] | None  # None: absent from the candidate

    def describe(self) -> str:
        def show(values: tuple[str | None, ...] | None) -> str:
            if values is None:
                return "(absent)"
            if is_secret_flag(self.flag):
                return " ".join("(switch)" if v is None else REDACTED for v in values) or "(switch)"
            return " ".join("(switch)" if v is None else v for v in values) or "(switch)"

        if self.flag == POSITIONAL:
            return f"positional arguments: {show(self.baseline)} -> {show(self.candidate)}"
        if self.baseline is None:
            return f"+ {self.flag} {show(self.candidate)}"
        if self.candidate is None:
            return f"- {self.flag} {show(self.baseline)}"
        return f"~ {self.flag}: {show(self.baseline)} -> {show(self.candidate)}"


@dataclass(frozen=True, slots=True)
class CommandDiff:
    differences: tuple[FlagDifference, ...]

    @property
    def flags(self) -> tuple[str, ...]:
        return tuple(d.flag for d in self.differences)

    def lines(self) -> list[str]:
        """One line per difference, for the terminal and the report."""
        return [d.describe() for d in self.differences] or ["(the commands are identical)"]

    def to_dict(self) -> dict[str, object]:
        return {
            "differences": [
                {"flag": d.flag, "text": d.describe()}
                | ({} if is_secret_flag(d.flag) else {"baseline": d.baseline, "candidate": d.candidate})
                for d in self.differences
            ]
        }


def command_diff(a: Sequence[str], b: Sequence[str], aliases: Mapping[str, str] | None = None) -> CommandDiff:
    """Every flag whose values differ between a (baseline) and b (candidate), sorted by flag; positionals too."""
    pa, pb = parse_command(a, aliases), parse_command(b, aliases)
    diffs: list[FlagDifference] = []
    if pa.positionals != pb.positionals:
        diffs.append(FlagDifference(POSITIONAL, pa.positionals, pb.positionals))
    for key in sorted(set(pa.flags) | set(pb.flags)):
        va, vb = pa.flags.get(key), pb.flags.get(key)
        if va != vb:
            diffs.append(FlagDifference(key, va, vb))
    return CommandDiff(tuple(diffs))


def is_speculation_flag(flag: str, exact: Iterable[str], prefixes: Iterable[str]) -> bool:
    return flag in set(exact) or any(flag.startswith(p) for p in prefixes)
