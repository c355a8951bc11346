"""`speculab methods`: what can run here — the engine asked (or its labelled table), the checkpoints read, the table.

The caller brings what the user has; a URL's look (engine, /version, /v1/models) is taken by the command layer
(`harness.servers.look.look_at_server`), so this package stays a stage: `methods`, `init` and `run` use it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from speculab.config.experiment import KNOWN_METHODS, SpeculationConfig
from speculab.demo_models import SHIPPED_MODELS
from speculab.errors import UserError, did_you_mean
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.servers.adapters import (
    adapter_for,
    askable_engines,
    engine_kinds,
    parse_command,
    plain_base,
    served,
)
from speculab.harness.servers.methods.checkpoint import read_checkpoint
from speculab.harness.servers.methods.declared import DeclaredMethods
from speculab.harness.servers.methods.probe import declared_by_command, declared_by_server
from speculab.harness.servers.methods.table import Given, MethodsTable, methods_table
from speculab.harness.servers.methods.vocab import vocab_match


def given_from_paths(model: str | None, draft: str | None, head: str | None) -> Given:
    """Read what the user passed (each a local checkpoint directory, or a shipped demo model's name as `speculab serve`
    takes it: demo, demo-draft, demo-eagle); a bad path is one UserError naming its flag."""

    def read(flag: str, path: str | None) -> Any:
        if path is None:
            return None
        try:
            return read_checkpoint(SHIPPED_MODELS.get(path, path))
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


def methods_here(
    engine: str,
    given: Given,
    *,
    command: Sequence[str] | None = None,
    server_version: Any = None,
    from_server: bool = False,
) -> MethodsTable:
    """The table for `engine`: asked through its launch command (or default executable), or, for a server behind a
    URL with no command given (`from_server`), from what the server says (speculab) or the labelled table."""
    if engine not in engine_kinds():
        raise UserError(f"--engine {engine}: unknown engine; use one of {', '.join(askable_engines())}")
    if from_server and not command:
        declared = declared_by_server(engine, server_version)
    else:
        declared = declared_by_command(engine, command)
    running = served(adapter_for(engine), server_version) if from_server else None
    return replace(methods_table(declared, given), running=running)


def check_methods(
    engine: str,
    command: Sequence[str] | None,
    specs: Sequence[SpeculationConfig],
    unchecked: str = "no_command",
) -> tuple[ReportWarning, ...]:
    """At plan time, before anything is launched: every `speculation.method` outside speculab's five must be one the
    engine's release declares, and every key or flag a speculation entry adds (its `options`, and what its method
    and k become) one that release's speculation config takes. Refused in one line naming the accepted ones (or the
    nearest) when the engine could be read; a warning (returned: a `methods_unchecked` record the report words) that
    it is unchecked when it could not (`unchecked`: why, when there is no `command`: two_url | whole_command |
    no_command). Nothing is asked when every entry is one of the five without options."""
    extra = list(dict.fromkeys(s.method for s in specs if s.method not in KNOWN_METHODS))
    # SGLang renamed its n-gram window flags away in 0.5.23: an entry that sets them is checked as options are
    lookup_checked = engine in engine_kinds() and adapter_for(engine).lookup_keys_checked
    with_options = [
        s
        for s in specs
        if s.options or (lookup_checked and (s.prompt_lookup_max is not None or s.prompt_lookup_min is not None))
    ]
    if not extra and not with_options:
        return ()
    what = {"methods": extra, "options_of": [s.label for s in with_options], "engine": engine}
    if command is None:
        return (_unchecked(what, unchecked),)
    if engine not in askable_engines():
        return (_unchecked(what, "not_askable"),)
    declared = declared_by_command(engine, command)
    if declared.fallback:
        return (_unchecked(what, "unreadable", problem=declared.problem),)
    release = f" {declared.release}" if declared.release else ""
    bad = [m for m in extra if m not in declared.methods]
    if bad:
        raise UserError(
            f"speculation.method {bad[0]}: {engine}{release} does not declare it (read from {declared.source}); "
            f"it accepts {', '.join(declared.methods)}"
        )
    cannot = [m for m in extra if m in declared.unavailable]
    if cannot:  # declared by the release, but this install would die starting it
        raise UserError(f"speculation.method {cannot[0]}: {declared.unavailable[cannot[0]]}; install it there first")
    if not declared.option_keys:  # the methods are known, the config's keys or flags not (an unknown layout)
        if not with_options:
            return ()
        options = {**what, "methods": [], "release": declared.release or ""}
        return (_unchecked(options, "options_unreadable"),)
    for spec in specs:
        _check_keys(engine, f"{engine}{release}", declared, spec)
    return ()


def _unchecked(what: dict[str, Any], why: str, **more: Any) -> ReportWarning:
    """The plan's warning that methods or options went unchecked, and why (the report words it)."""
    return ReportWarning(WarningKind.METHODS_UNCHECKED, fields={**what, "why": why, **more})


def added_keys(engine: str, speculation: SpeculationConfig) -> tuple[str, ...]:
    """What the adapter adds for `spec` in the engine's own config form: the `--speculative-config` JSON keys
    (vLLM, speculab), else the flags; `engine_args` are the user's raw flags and not counted."""
    adapter = adapter_for(engine)
    base = plain_base(adapter)  # TGI's plain arm, which its head methods require
    argv = adapter.candidate_command(base, replace(speculation, engine_args=()))
    flags = parse_command(argv).flags
    if adapter.json_config:
        body = json.loads(flags["--speculative-config"][0])
        return tuple(body)
    return tuple(flags)


def _check_keys(engine: str, who: str, declared: DeclaredMethods, speculation: SpeculationConfig) -> None:
    accepted = set(declared.option_keys)
    for key in added_keys(engine, speculation):
        if key in accepted:
            continue
        form = "--speculative-config key" if adapter_for(engine).json_config else "flag"
        where = declared.option_source or declared.source
        raise UserError(
            f"speculation {speculation.label}: {who} has no {form} {key} (read from {where})"
            f"{did_you_mean(key, accepted)}"
        )
