"""`speculab demo`: the whole A/B job on the shipped demo model pair, on speculab's own engine or llama.cpp.

Up to four arms, launched one at a time through the same lifecycle `speculab run` uses: plain decoding, n-gram
prompt lookup, the demo draft model and (on speculab's engine) the demo EAGLE head, each at concurrency 1 and an
operating point, on built-in input-grounded and open-ended prompts (`builtin:mixed`) and two-turn conversations
(`builtin:chat`). The candidates' commands are derived by the engine's adapter and checked to
differ from the baseline only in speculation. Engines:

* `speculab` (default): `python -m speculab serve` with this interpreter, so the demo works from any install.
* `llamacpp`: the `llama-server` and the GGUF pair `scripts/install_llama_server.sh` builds and converts
  (`servers.llamacpp_install`), with `--metrics` on so acceptance comes from llama.cpp's own counters.

Sized to finish in about three minutes on two CPU cores (`quick`: about one).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

from speculab.commands.run.plan import (
    ArmPlan,
    RunPlan,
    candidate_arms,
    candidate_infos,
    enforce_single_change,
)
from speculab.config import LoadLevel, SpeculationConfig
from speculab.errors import UserError
from speculab.harness.client.endpoint import RequestSampling
from speculab.harness.design import BASELINE, ArmInfo, LevelSpec, Setup
from speculab.harness.servers.adapters import adapter_for
from speculab.harness.servers.adapters import llamacpp as llamacpp_adapter
from speculab.harness.servers.adapters import speculab as speculab_adapter
from speculab.harness.servers.adapters.flags import redact_command
from speculab.harness.servers.llamacpp_install import LlamacppInstall
from speculab.harness.servers.process import ServerCommand, free_port
from speculab.harness.workload.conversation import conversations
from speculab.harness.workload.fit import fit_items
from speculab.harness.workload.sources import load_workload

DEMO_WORKLOAD = "builtin:mixed"  # grounded (code edits, extraction, summaries, RAG) and open-ended, interleaved
# and two-turn conversations (sent first): each arm's second turn carries its own first answer (workload.conversation)
DEMO_CONVERSATIONS = "builtin:chat"
DEMO_CONVERSATION_CATEGORY = "chat-writing"  # short turns: a conversation fits the demo model's context
EMBEDDED, LLAMACPP = speculab_adapter.KIND, llamacpp_adapter.KIND
ENGINES = (EMBEDDED, LLAMACPP)
DEMO_CONTEXT = 512  # the demo models' context (llama-server splits --ctx-size over its --parallel slots)
# One compute thread: ggml's threads wait for each other at every operation, spinning, and the demo models are tiny;
# on two cores shared with the client, a second thread made a 48-token request take 6.9 s instead of 0.3 s.
LLAMACPP_THREADS = 1


@dataclass(frozen=True, slots=True)
class DemoConfig:
    model: str = "demo"  # the shipped target; or a model directory (speculab) or a .gguf file (llamacpp)
    draft: str | None = "demo-draft"  # the shipped draft; None: no draft-model arm
    eagle: str | None = "demo-eagle"  # the shipped EAGLE head (speculab's engine only); None: no EAGLE arm
    engine: str = EMBEDDED  # one of ENGINES
    quick: bool = False
    port: int | None = None  # None: a free port
    operating_concurrency: int = 4
    num_speculative_tokens: int = 4
    max_num_seqs: int = 4
    ready_timeout_s: float = 300.0

    @property
    def num_prompts(self) -> int:
        # 24: at concurrency 4 the verdict counts groups of 4 prompts sent together, and needs 6 of them
        return 8 if self.quick else 24

    @property
    def num_conversations(self) -> int:
        """Two-turn conversations among the demo's `num_prompts` requests."""
        return 1 if self.quick else 2

    @property
    def max_tokens(self) -> int:
        return 48 if self.quick else 64


def demo_speculations(cfg: DemoConfig) -> list[SpeculationConfig]:
    k = cfg.num_speculative_tokens
    specs = [SpeculationConfig("ngram", k, prompt_lookup_max=4, prompt_lookup_min=2)]
    if cfg.draft is not None:
        draft = cfg.draft
        if cfg.engine == LLAMACPP:
            draft = str(LlamacppInstall.at().model(cfg.draft, draft=True))
        specs.append(SpeculationConfig("draft_model", k, model=draft))
    if cfg.eagle is not None and cfg.engine == EMBEDDED:  # llama.cpp has no EAGLE-1 heads for our target
        specs.append(SpeculationConfig("eagle", k, model=cfg.eagle))
    return specs


def base_command(cfg: DemoConfig, port: int) -> tuple[str, ...]:
    """The plain arm's server command for the demo's engine."""
    if cfg.engine == LLAMACPP:
        inst = LlamacppInstall.at()
        slots = cfg.max_num_seqs
        serve = [str(inst.require_server()), "-m", str(inst.model(cfg.model)), "--host", "127.0.0.1"]
        metrics = ["--port", str(port), "--metrics"]  # acceptance from llama.cpp's own counters
        slot_args = ["--parallel", str(slots), "--ctx-size", str(DEMO_CONTEXT * slots)]
        return (*serve, *metrics, *slot_args, "--threads", str(LLAMACPP_THREADS))
    if cfg.engine != EMBEDDED:
        raise UserError(f"speculab demo runs on {' or '.join(ENGINES)}, not {cfg.engine!r}")
    return (*speculab_adapter.serve_command(sys.executable, cfg.model, port), "--max-num-seqs", str(cfg.max_num_seqs))


def demo_plan(cfg: DemoConfig) -> RunPlan:
    """Plain vs n-gram vs draft (vs EAGLE) on the demo's engine; every candidate checked to differ only in
    speculation."""
    port = cfg.port or free_port()
    base_cmd = ServerCommand(
        command=base_command(cfg, port),
        port=port,
        ready_timeout_s=cfg.ready_timeout_s,
        port_chosen=cfg.port is None,  # a port taken before the server binds it moves the server to another
    )
    adapter = adapter_for(cfg.engine)
    base = ArmPlan(ArmInfo(BASELINE, "plain", base_cmd.url, cfg.engine, redact_command(base_cmd.command)), base_cmd)
    # the list form of `speculation:`, as `speculab run` builds it: one candidate per block, each checked
    specs = demo_speculations(cfg)
    infos = [
        replace(info, label=f"draft k={sp.num_speculative_tokens}") if sp.method == "draft_model" else info
        for sp, info in zip(specs, candidate_infos(specs), strict=True)
    ]
    cands, diffs = candidate_arms(adapter, base_cmd, cfg.engine, specs, infos)
    arms = [base, *cands]
    changes = [enforce_single_change(c, allow_extra_diff=False) for c in diffs]
    wl = load_workload(DEMO_WORKLOAD, seed=0, api="completions")
    # Prompts that fit the demo model's 512-token context with room for the output (workload.fit, as every command
    # fits), in the set's interleaved order (code edits, writing, extraction, questions, summaries, math), after the
    # conversations' turns, renumbered as the run's pairing keys; every item capped at the demo's max_tokens (some
    # built-in items ask for more): the run must fit in minutes.
    fitting = fit_items(
        wl.items,
        context=DEMO_CONTEXT,
        policy="skip",
        max_tokens=cfg.max_tokens,
        overrides_items=True,
        num_prompts=None,
        seed=0,
    ).items
    short = [it for it in fitting if it.prompt is not None]
    chat = load_workload(DEMO_CONVERSATIONS, seed=0, api="completions")
    convs = [c for c in conversations(chat.items) if c[0].category == DEMO_CONVERSATION_CATEGORY]
    turns = [t for c in convs[: cfg.num_conversations] for t in c]
    # conversations first: their turns go one after another, so at the end of a closed-loop run they would leave
    # workers idle (fewer requests in flight than the level asks); at the start the single prompts fill in
    chosen = turns + short[: cfg.num_prompts - len(turns)]
    items = tuple(
        replace(it, index=i, max_tokens=min(it.max_tokens or cfg.max_tokens, cfg.max_tokens))
        for i, it in enumerate(chosen)
    )
    loads = (LoadLevel(concurrency=1), LoadLevel(concurrency=cfg.operating_concurrency))
    levels = (
        LevelSpec("concurrency", 1, ("low",)),
        LevelSpec("concurrency", cfg.operating_concurrency, ("operating",)),
    )
    setup = Setup(
        name="speculab demo" + (" on llama.cpp" if cfg.engine == LLAMACPP else ""),
        workload_name=wl.name,
        workload_source=f"{len(turns)} turns of {DEMO_CONVERSATIONS}: {chat.source}; then {wl.source}",
        api="completions",
        items=items,
        temperature=0.0,
        seed=0,
        max_tokens=cfg.max_tokens,
        levels=levels,
        repeats=1,
        command="demo",
    )
    return RunPlan(
        setup=setup,
        arms=tuple(arms),
        changes=tuple(changes),
        loads=loads,
        sampling=RequestSampling(max_tokens=cfg.max_tokens, temperature=0.0, seed=0),
        warmup_requests=2,
        memory_interval_s=1.0,
        stop_grace_s=10.0,
    )
