"""Each block's cache reset for the block runner (`cache: {reset: between-blocks | never}`): asked through the arm's
engine adapter (`servers.cache_reset`), kept per block, and a server's refusal noted for the run once per arm."""

from __future__ import annotations

from collections.abc import Callable

import aiohttp

from speculab.commands.run.plan import ArmPlan
from speculab.harness.records import CacheResetOutcome
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.servers.adapters import adapter_for
from speculab.harness.servers.cache_reset import refusal_warning, reset_caches


class BlockResets:
    def __init__(self, engine_of: Callable[[str], str], note: Callable[[ReportWarning], None]):
        self.engine_of = engine_of  # an arm's engine as observed (two-URL mode detects it from the server)
        self.note = note
        self._refused: set[str] = set()  # arms whose refusal is noted already

    async def before(self, session: aiohttp.ClientSession, arm: ArmPlan, block: int, mode: str) -> CacheResetOutcome:
        """Empty the arm's server's caches before the block's measured requests: after its warmup, which sends the
        workload's own prompts, so no measured request finds them cached. A refusal leaves the block to run."""
        reset = adapter_for(self.engine_of(arm.info.name)).cache_reset
        done = await reset_caches(session, arm.info.url, reset, block, mode=mode, api_key=arm.api_key)
        if done.outcome == "refused" and arm.info.name not in self._refused:
            self._refused.add(arm.info.name)
            self.note(refusal_warning(arm.info.label, arm.info.url, done, reset))
        return done
