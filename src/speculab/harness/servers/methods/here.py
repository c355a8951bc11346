"""`speculab methods`: what can run here — the engine asked (or its labelled table), the checkpoints read, the table.

The caller brings what the user has; a URL's look (engine, /version, /v1/models) is taken by the command layer
(`harness.experiment.init.look_at_server`), so this package stays below the commands.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from speculab.config.experiment import ENGINE_KINDS, KNOWN_METHODS
from speculab.errors import UserError
from speculab.harness.servers.methods.checkpoint import read_checkpoint
from speculab.harness.servers.methods.probe import declared_by_command, declared_by_server
from speculab.harness.servers.methods.table import Given, MethodsTable, methods_table
from speculab.harness.servers.methods.vocab import vocab_match

ASKABLE = tuple(k for k in ENGINE_KINDS if k != "other")


def given_from_paths(model: str | None, draft: str | None, head: str | None) -> Given:
    """Read what the user passed (each a local checkpoint directory); a bad path is one UserError naming its flag."""

    def read(flag: str, path: str | None) -> Any:
        if path is None:
            return None
        try:
            return read_checkpoint(path)
        except UserError as e:
            raise UserError(f"{flag}: {e}") from None

    target, d, h = read("--model", model), read("--draft", draft), read("--head", head)
    vocab = None
    if target is not None and d is not None:
        try:
            vocab = vocab_match(target.path, d.path)
        except UserError as e:
            raise UserError(f"--model/--draft: {e}") from None
    return Given(target, d, h, vocab)


def local_model(models: Sequence[dict[str, Any]]) -> str | None:
    """The served model's checkpoint directory when the server runs on this machine (vLLM's `root`, speculab's id)
    and it holds a config.json; None otherwise (a guess that is not a checkpoint must not fail the command)."""
    for card in models:
        for key in ("root", "id"):
            value = card.get(key)
            if isinstance(value, str) and value and (Path(value).expanduser() / "config.json").is_file():
                return value
    return None


def methods_here(engine: str, given: Given, *, command: Sequence[str] | None = None,
                 server_version: Any = None, from_server: bool = False) -> MethodsTable:  # fmt: skip
    """The table for `engine`: asked through its launch command (or default executable), or, for a server behind a
    URL with no command given (`from_server`), from what the server says (speculab) or the labelled table."""
    if engine not in ENGINE_KINDS:
        raise UserError(f"--engine {engine}: unknown engine; use one of {', '.join(ASKABLE)}")
    if from_server and not command:
        declared = declared_by_server(engine, server_version)
    else:
        declared = declared_by_command(engine, command)
    return methods_table(declared, given)


def check_methods(engine: str, command: Sequence[str] | None, methods: Sequence[str],
                  unchecked: str = "no launch command") -> tuple[str, ...]:  # fmt: skip
    """At plan time, before anything is launched: every `speculation.method` outside speculab's five must be one the
    engine's release declares. Refused in one line listing the accepted ones when the engine could be read; a
    warning (returned) that it is unchecked when it could not (`unchecked`: why, when there is no `command`).
    Nothing is asked when all are among the five."""
    extra = list(dict.fromkeys(m for m in methods if m not in KNOWN_METHODS))
    if not extra:
        return ()
    names = ", ".join(extra)
    if command is None:
        return (f"speculation method {names} is unchecked: {unchecked}",)
    if engine not in ASKABLE:
        return (f"speculation method {names} is unchecked: speculab cannot ask engine {engine} what it accepts",)
    declared = declared_by_command(engine, command)
    if declared.fallback:
        return (f"speculation method {names} is unchecked: {declared.problem or 'the engine could not be read'}; "
                "the engine will say at launch",)  # fmt: skip
    bad = [m for m in extra if m not in declared.methods]
    if bad:
        release = f" {declared.release}" if declared.release else ""
        raise UserError(
            f"speculation.method {bad[0]}: {engine}{release} does not declare it (read from {declared.source}); "
            f"it accepts {', '.join(declared.methods)}"
        )
    return ()
