"""`speculab init --url URL`: look at a running server, guess its engine, and write a commented starter experiment.

The engine is detected from /metrics names, /v1/models and /version (`detect_engine`). For an engine whose
speculation flags speculab knows, the file uses launch mode, so speculab starts both arms itself and can verify
that speculation is the only change; the command is a guess to complete (the model path comes from /v1/models).
For any other engine the file uses two-URL mode: the candidate URL is a placeholder for your speculative server.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from speculab.errors import UserError
from speculab.harness.analysis.comparison.paired import MIN_LAUNCHES
from speculab.harness.results.atomic_file import write_atomic
from speculab.harness.results.warnings import ReportWarning
from speculab.harness.servers.adapters import adapter_for, askable_engines
from speculab.harness.servers.look import ServerLook, look_at_server

if TYPE_CHECKING:
    from speculab.harness.servers.methods.table import MethodsTable


def _q(s: str) -> str:
    """A YAML double-quoted scalar."""
    return json.dumps(s)


@dataclass(frozen=True, slots=True)
class StarterSize:
    """How big the starter is: it must fit the server's context (workload.fit) and finish in minutes."""

    context: int | None = None  # the served model's, from /v1/models
    max_tokens: int = 256
    num_prompts: int = 64
    operating_concurrency: int = 8
    # the fewest launches per arm whose intervals mean something: the launch effect and throughput and cost get an
    # interval over repeats from 3 (with 2, t has 1 degree of freedom: ×12.7 wide, and the report withholds it)
    repeats: int = MIN_LAUNCHES
    fitting: int | None = None  # built-in prompts of the starter's set that fit the context
    pool: int | None = None
    estimate_s: float | None = None  # the run's duration, estimated from probe requests (experiment.preflight)
    launches: int = 0  # server start-ups the estimate does not count (the server was already up)


SMALL_CONTEXT = 2048  # below it (the demo's 512), a starter of short outputs at concurrency 4, as `speculab demo`


def starter_size(look: ServerLook, spec: str = "builtin:mixed") -> StarterSize:
    """The starter's size for this server: the detected context decides the output limit, and how many of the
    set's prompts fit it (the others are left out by `workload.fit: skip`, and replaced by the next ones)."""
    from speculab.harness.workload.fit import context_from_cards, fit_items
    from speculab.harness.workload.sources import load_workload

    model_ids = [str(m.get("id")) for m in look.models if m.get("id")]
    context = context_from_cards(look.models, model_ids[0]) if model_ids else None
    size = StarterSize(context)
    if context is None:
        return size
    if context < SMALL_CONTEXT:
        # 24 prompts at concurrency 4: the 6 groups of 4 a verdict needs at that load (docs/statistics.md)
        size = StarterSize(context, max_tokens=64, num_prompts=24, operating_concurrency=4)
    pool = load_workload(spec, seed=0).items
    fit = fit_items(
        pool, context=context, policy="skip", max_tokens=size.max_tokens, overrides_items=True, num_prompts=None, seed=0
    )
    return replace(size, fitting=len(fit.items), pool=len(pool))


_K_GRID = (2, 4)  # every applicable method at these k, each its own candidate
# A methods-table reason in words: the report's (`speculab.report.phrases.reason_text`), handed in by the CLI, since a
# command never imports the report; the starter's comments say what `speculab methods` says.
Words = Callable[[ReportWarning], str]


@dataclass(frozen=True, slots=True)
class StarterMethods:
    """`speculab methods`' table for the server and the words of its rows' reasons."""

    table: MethodsTable
    words: Words


def _entry(method: str, k: int, engine: str, model: str | None) -> str:
    ngram_lookup = method == "ngram" and adapter_for(engine).ngram_lookup
    lookup = ", prompt_lookup_max: 4, prompt_lookup_min: 2" if ngram_lookup else ""
    path = f", model: {_q(model)}" if model is not None else ""
    return f"{{method: {method}, num_speculative_tokens: {k}{lookup}{path}}}"


def _model_for(row: Any, given: Any) -> str | None:
    """The path a method's entry carries: the one given, a placeholder for one not given, None for none needed."""
    facts = given.draft if row.needs == "draft" else given.head if row.needs in ("eagle", "eagle3", "medusa") else None
    if facts is not None:
        return str(facts.path)
    return {"--draft": "/path/to/draft", "--head": "/path/to/head"}.get(row.path_flag)


def speculation_from_methods(table: Any, words: Words) -> str | None:
    """The starter's `speculation:` list from `speculab methods`' table (harness.servers.methods): every method that
    can run here at the k grid, the ones that cannot commented with why (a path not given names its flag; `words`
    says a row's reason); None when nothing can run (the engine's default list is written then)."""
    engine, live, off = table.declared.engine, [], []
    for r in table.rows:
        if r.experiment_method is None:
            continue  # the engine's own name: listed below, not written (speculab derives its flags only roughly)
        model = _model_for(r, table.given)
        if r.available == "yes":
            live += [f"  - {_entry(r.experiment_method, k, engine, model)}" for k in _K_GRID]
            continue
        why = f"{r.available}: {words(r.why)}".replace("\n", " ").replace("\r", " ")  # a comment is one line
        off.append(f"  # - {_entry(r.experiment_method, 4, engine, model)}   # {why}")
    more = [r.method for r in table.rows if r.experiment_method is None and r.available == "yes"]
    if more:  # the engine's own methods an experiment does not take yet: their flags are in `speculab methods`
        off.append(f"  # also declared here (`method: NAME`, checked against the engine when run): {', '.join(more)}")
    return "\n".join([*live, *off]) if live else None


def starter_yaml(look: ServerLook, size: StarterSize | None = None, methods: StarterMethods | None = None) -> str:
    """A commented experiment file for this server that `load_experiment` accepts as written; `methods`: the table
    of `speculab methods` for it, with the words of its reasons (None: the engine's default list)."""
    size = size or StarterSize()
    model_ids = [str(m.get("id")) for m in look.models if m.get("id")]
    model_id = model_ids[0] if model_ids else "MODEL"
    root = next((str(m["root"]) for m in look.models if m.get("root")), model_id)
    parts = urlsplit(look.url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    adapter = adapter_for(look.engine)
    # the context it serves now, said on the command line: the run then fits the workload before launching anything
    command = adapter.launch_command(root, port, size.context)
    evidence = "its /metrics names, /v1/models and /version" if look.metric_names else "/v1/models and /version"
    head = [
        f"# speculab experiment, written by `speculab init --url {look.url}`.",
        f"# Detected engine: {look.engine} (from {evidence}); served model(s): {', '.join(model_ids) or 'none'}.",
        "# Run it with `speculab run THIS_FILE`; every key is explained in docs/experiment.md.",
        *_estimate_lines(size),
        f"name: speculation on {model_id}",
        "workload:",
        "  spec: builtin:mixed   # builtin:grounded | builtin:open | PATH.jsonl | synthetic:input=N,output=N",
        f"  num_prompts: {size.num_prompts}                  # more prompts: narrower intervals (grow this first)",
        "  api: completions                 # completions | chat",
        "  warmup_requests: 4",
        *_fit_lines(size),
        "sampling:",
        "  temperature: 0.0                 # greedy: outputs must match exactly between arms",
        f"  max_tokens: {size.max_tokens}",
        "  seed: 0",
        "loads:",
        "  low: {concurrency: 1}            # where speculation helps most",
        f"  operating: {{concurrency: {size.operating_concurrency}}}      # your production load (or {{rate: R}} "
        "requests/s)",
        "  # sweep: [{concurrency: 1}, {concurrency: 4}, {concurrency: 16}]   # to find the crossover",
        "slos: {ttft_s: 1.0, tpot_s: 0.1}",
        f"repeats: {size.repeats}                         # arms alternate ABBA across repeats; {MIN_LAUNCHES} or more "
        "give throughput and cost an interval",
        "checks: true",
        "# cost: {baseline: {usd_per_hour: 2.5, gpus: 1}, target_rate_rps: 20}",
    ]
    if command is not None and adapter.starter_grid is not None:
        args = ", ".join(_q(a) for a in command)
        body = [
            "baseline:",
            "  # Launch mode: speculab starts this command, measures it, stops it, then starts the same command with",
            "  # speculation added, so it can check that speculation is the only change. The command below is a",
            f"  # guess: complete it with the flags you serve with. Stop the server now at {look.url} first (or",
            "  # change the port): speculab refuses to launch onto a port that is in use.",
            "  launch:",
            f"    engine: {look.engine}",
            f"    command: [{args}]",
            f"    port: {port}",
            f"    host: {_q(host)}",
            "    ready_timeout_s: 900",
            f"  # model: {_q(model_id)}           # served model name; default: the server's only model",
            "  # Two-URL mode instead (both servers already running; the single change cannot be verified):",
            f"  # url: {look.url}",
            "speculation:                       # the candidates; the report names the best at each load",
            *_methods_head(methods),
            (methods is not None and speculation_from_methods(methods.table, methods.words))
            or adapter.starter_grid.rstrip("\n"),
            "# candidate: {url: http://host:port}   # only with baseline.url (two-URL mode)",
        ]
    else:
        body = [
            "baseline:",
            f"  url: {look.url}",
            f"  model: {_q(model_id)}",
            "speculation:                       # what the candidate server runs (recorded in the report)",
            "  method: ngram",
            "  num_speculative_tokens: 4",
            "candidate:",
            "  # Two-URL mode: start your speculative server here. speculab cannot verify that speculation is the",
            "  # only change between the two servers; the report says so and records what each reports about itself.",
            f"  url: http://{host}:{port + 1}",
        ]
    return "\n".join([*head, *body]) + "\n"


def _methods_head(methods: StarterMethods | None) -> list[str]:
    """Where the list below came from, when it came from `speculab methods`."""
    if methods is None or speculation_from_methods(methods.table, methods.words) is None:
        return []
    d = methods.table.declared
    note = adapter_for(d.engine).starter_note  # SGLang's: its n-gram needs CUDA
    head = f"  # what can run here, from `speculab methods` (methods from {d.source}; docs/methods.md)"
    return [head, *([f"  # {note}"] if note else [])]


def _fit_lines(size: StarterSize) -> list[str]:
    """workload.fit with what it will do on this server (how many of the set's prompts fit its context)."""
    line = "  fit: skip                        # prompts too long for the context: skip (left out) | cap | refuse"
    if size.context is None or size.fitting is None:
        return [line]
    return [
        line,
        f"  # {size.fitting} of the set's {size.pool} prompts fit this server's {size.context}-token context "
        f"with max_tokens {size.max_tokens}",
    ]


def _estimate_lines(size: StarterSize) -> list[str]:
    if size.estimate_s is None:
        return [
            "# `speculab run THIS_FILE --dry-run` says how long it will take. To grow it: num_prompts first"
            " (narrower intervals), then repeats, max_tokens, loads.sweep."
        ]
    ups = f", plus {size.launches} server start-ups" if size.launches else ""
    return [
        f"# On this server it takes about {size.estimate_s / 60:.0f} min{ups} (estimated by `speculab init` from "
        "probe requests; `speculab run THIS_FILE --dry-run` re-estimates).",
        "# To grow it: num_prompts first (narrower intervals), then repeats, max_tokens, loads.sweep.",
    ]


TARGET_S = 600.0  # the starter is sized to finish in about this long on the server it looked at
MAX_PROMPTS = 200


def sized_to_target(
    plan: Any, timing: Any, context: int | None, size: StarterSize, target_s: float = TARGET_S
) -> StarterSize:
    """The starter's num_prompts grown (or kept at its minimum) so the run takes about `target_s` (pure): the
    estimate is linear in the prompts, so two evaluations give its slope. Whole groups of the operating load."""
    from speculab.commands.run.preflight import estimate_s, fit_plan, launches

    def at(n: int) -> float:
        return estimate_s(fit_plan(replace(plan, num_prompts=n), context)[0], timing)

    n0 = size.num_prompts
    e0, e1 = at(n0), at(2 * n0)
    per_prompt = max((e1 - e0) / n0, 1e-9)
    step = size.operating_concurrency
    n = max(n0, min(MAX_PROMPTS, int((n0 + (target_s - e0) / per_prompt) // step * step)))
    return replace(size, num_prompts=n, estimate_s=at(n), launches=launches(plan))


@dataclass(frozen=True, slots=True)
class StarterPaths:
    """What `speculab init` was given besides the URL (local checkpoint directories; None: not given)."""

    model: str | None = None
    draft: str | None = None
    head: str | None = None


def starter_methods(look: ServerLook, paths: StarterPaths, words: Words) -> StarterMethods | None:
    """`speculab methods`' table for this server (what its engine declares, checked against the paths) with the
    words of its reasons, or None for an engine speculab knows no methods of."""
    from speculab.harness.servers.methods.here import given_from_paths, local_model, methods_here

    if look.engine not in askable_engines():
        return None
    given = given_from_paths(paths.model or local_model(look.models), paths.draft, paths.head)
    return StarterMethods(methods_here(look.engine, given, server_version=look.version, from_server=True), words)


def write_starter(
    url: str,
    output: Path,
    words: Words,
    *,
    force: bool = False,
    target_s: float | None = TARGET_S,
    paths: StarterPaths | None = None,
) -> tuple[ServerLook, StarterSize]:
    """`speculab init`: look at the server, list what can run on it (`speculab methods`; `words` says why a method
    cannot, in its comment), size the starter to its context and (timing a few probe requests on it) to about
    `target_s` (None: not timed), check that it loads as written, write it."""
    from speculab.config import parse_experiment

    if output.exists() and not force:
        raise UserError(f"{output} exists; pass --force to overwrite it or --output another file")
    look = asyncio.run(look_at_server(url))
    methods = starter_methods(look, paths or StarterPaths(), words)
    size = starter_size(look)
    exp = parse_experiment(starter_yaml(look, size, methods), str(output))  # the starter must load as written
    if target_s is not None:
        size = _timed(exp, size, target_s)
    text = starter_yaml(look, size, methods)
    parse_experiment(text, str(output))
    try:
        write_atomic(output, text)
    except OSError as e:
        raise UserError(f"{output}: cannot write ({e.strerror}); choose another --output") from None
    return look, size


def _timed(exp: Any, size: StarterSize, target_s: float) -> StarterSize:
    """The size grown to `target_s` from probe requests on the server (unchanged when they cannot be timed)."""
    from speculab.commands.run.plan import plan_experiment
    from speculab.commands.run.preflight import dry_run_interruptible

    try:
        d = dry_run_interruptible(plan_experiment(exp))
    except UserError:  # a starter whose workload cannot fit is still written: `speculab run` says why
        return size
    return size if d.timing is None else sized_to_target(d.plan, d.timing, d.fit.context, size, target_s)
