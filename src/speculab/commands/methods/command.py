"""The `speculab methods` command: its flags as one record, and the table they ask for."""

from __future__ import annotations

import asyncio
import shlex
from dataclasses import dataclass

from speculab.errors import UserError
from speculab.harness.servers.look import look_at_server
from speculab.harness.servers.methods.here import given_from_paths, local_model, methods_here
from speculab.harness.servers.methods.table import MethodsTable


@dataclass(frozen=True, slots=True)
class MethodsFlags:
    """What `speculab methods` was given: a running server's URL or an engine kind (with its launch command), and the
    user's checkpoint directories (or shipped demo names)."""

    url: str | None = None
    engine: str | None = None
    command: str | None = None
    model: str | None = None
    draft: str | None = None
    head: str | None = None


def methods_table(flags: MethodsFlags) -> MethodsTable:
    """The methods table for the flags; a URL is looked at first (its engine, release and local checkpoint)."""
    if flags.url is None and flags.engine is None:
        raise UserError("give --url of a running server, or --engine KIND (with --command if it is not on PATH)")
    try:
        argv = shlex.split(flags.command) if flags.command else None
    except ValueError as e:
        raise UserError(f"--command: {e}; quote it as a shell would") from None
    version, kind, model = None, flags.engine, flags.model
    if flags.url is not None:
        look = asyncio.run(look_at_server(flags.url))
        version, kind = look.version, flags.engine or look.engine
        model = model or local_model(look.models)
    given = given_from_paths(model, flags.draft, flags.head)
    return methods_here(str(kind), given, command=argv, server_version=version, from_server=flags.url is not None)
