"""`speculab diagnose` flags (and optionally an experiment file) -> a validated DiagnoseConfig. Nothing touches the
network; every mistake is one UserError line, raised before any request is sent (or any server started)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from urllib.parse import urlsplit

from speculab.commands.diagnose.config import DiagnoseConfig
from speculab.config import DEFAULT_MAX_TOKENS
from speculab.errors import UserError, did_you_mean
from speculab.harness.client.endpoint import EndpointConfig, RequestSampling, parse_extra_body, resolve_api_key
from speculab.harness.results.run_dir import RunDir
from speculab.harness.servers.adapters import adapter_for, response_reader
from speculab.harness.servers.adapters.flags import redact_command
from speculab.harness.servers.process import ServerCommand, chosen_port_command  # the lifecycle's launcher


@dataclass(frozen=True, slots=True)
class DiagnoseFlags:
    """`speculab diagnose`'s flags as the CLI parsed them (None: not given, so an --experiment file or the default
    fills it): the CLI's defaults, held equal to these by tests/unit/test_cli_flags.py."""

    url: str | None = None
    output: Path | None = None
    model: str | None = None
    api: str | None = None
    workload: str | None = None
    num_prompts: int | None = None
    concurrency: int | None = None
    trace_speed: float | None = None
    workers: int = 1
    ray: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    seed: int | None = None
    ignore_eos: bool = False
    max_model_len: int | None = None
    max_prompt_tokens: int | None = None
    sweep_points: int = 6
    sweep_repeats: int = 3
    idle: float = 0.0
    prefix_tokens: int | None = None
    probe_seed: int | None = None
    launch_cmd: str | None = None
    engine: str = "other"
    ready_timeout: float = 600.0
    experiment: str | None = None
    api_key: str | None = None
    timeout: float = 600.0
    include_usage: bool = True
    continuous_usage: bool = True
    extra_body: str | None = None
    scrape: bool = True
    max_error_rate: float = 0.02


def _launch_from_cmd(cmd: str, url: str, engine: str, ready_timeout_s: float) -> ServerCommand:
    try:
        argv = shlex.split(cmd)
    except ValueError as e:
        raise UserError(f"--launch-cmd cannot be split into arguments ({e}); check its quotes") from None
    if not argv:
        raise UserError("--launch-cmd is empty; give the server command, e.g. 'speculab serve demo --port 8011'")
    parts = urlsplit(url)
    if parts.port is None:
        raise UserError(f"--url {url!r} needs an explicit port with --launch-cmd (where the launched server listens)")
    if not ready_timeout_s > 0:
        raise UserError(f"--ready-timeout must be positive seconds, got {ready_timeout_s}")
    health = adapter_for(engine).health_path
    return ServerCommand(tuple(argv), parts.port, {}, parts.hostname or "127.0.0.1", health, ready_timeout_s)


def _from_experiment(path: str, f: DiagnoseFlags) -> tuple[DiagnoseFlags, ServerCommand | None]:
    """Fill flags the user did not give from an experiment file (its baseline arm, workload, sampling, load), and
    the baseline's launch when the file launches it and no --launch-cmd was given."""
    from speculab.config import load_experiment

    exp = load_experiment(path)
    b = exp.baseline
    launch = None
    if b.launch is not None and f.launch_cmd is None:
        la = b.launch
        health = la.health_path or adapter_for(la.engine).health_path
        launch = ServerCommand(la.command, la.port or 0, dict(la.env), la.host, health, la.ready_timeout_s)
        if la.port is None:  # `port: auto`
            launch = chosen_port_command(launch)
    api_key = f.api_key
    if api_key is None and b.api_key_env:
        import os

        api_key = os.environ.get(b.api_key_env)
    w, s = exp.workload, exp.sampling
    f = replace(
        f,
        url=f.url if f.url is not None else launch.url if launch is not None else b.base_url,
        model=b.model if f.model is None and b.model else f.model,
        api_key=api_key,
        workload=f.workload or w.spec,
        api=f.api or w.api,
        num_prompts=w.num_prompts if f.num_prompts is None else f.num_prompts,
        max_tokens=s.max_tokens if f.max_tokens is None else f.max_tokens,  # None: the items' own limits
        temperature=s.temperature if f.temperature is None else f.temperature,
        ignore_eos=f.ignore_eos or s.ignore_eos,
        seed=s.seed if f.seed is None else f.seed,
    )
    op = exp.loads.operating
    if op.trace_speed is not None:  # the experiment's operating point replays its trace: so does diagnose
        f = replace(f, trace_speed=f.trace_speed or op.trace_speed)
        if f.concurrency is None:
            f = replace(f, concurrency=op.max_concurrency or 1)
    if f.concurrency is None:
        c = op.concurrency if op.concurrency is not None else op.max_concurrency
        if c is None:
            raise UserError(
                f"{path}: loads.operating is an uncapped rate; diagnose runs a closed loop: pass --concurrency N"
            )
        f = replace(f, concurrency=c)
    return f, launch


def diagnose_config_from_flags(f: DiagnoseFlags, argv: Sequence[str] = ()) -> DiagnoseConfig:
    """Validate every flag (and the experiment file, if given); build the config. The workload is loaded and
    checked by `run_diagnosis` before any request."""
    launch = None
    if f.experiment:
        f, launch = _from_experiment(f.experiment, f)
    if not f.url:
        raise UserError("give --url URL (a running server, or where --launch-cmd's server will listen) or --experiment")
    api = f.api or "completions"
    if api not in ("completions", "chat"):
        raise UserError(
            f"--api must be 'completions' or 'chat', not {api!r}" + did_you_mean(api, ("completions", "chat"))
        )
    for name in ("timeout", "ready_timeout"):
        if not getattr(f, name) > 0:
            raise UserError(f"--{name.replace('_', '-')} must be positive seconds, got {getattr(f, name)}")
    if f.max_tokens is not None and f.max_tokens < 1:
        raise UserError(f"--max-tokens must be at least 1, got {f.max_tokens}")
    ep = EndpointConfig(
        base_url=f.url,
        model=f.model or "",
        api=api,
        api_key=resolve_api_key(f.api_key),
        timeout_s=f.timeout,
        include_usage=f.include_usage,
        continuous_usage_stats=f.continuous_usage and f.include_usage,
        extra_body=MappingProxyType(parse_extra_body(f.extra_body)),
        read=response_reader(f.engine),  # `other` unless launched: every engine's fields are read
    )
    if f.launch_cmd is not None:
        launch = _launch_from_cmd(f.launch_cmd, ep.base_url, f.engine, f.ready_timeout)
    elif f.engine != "other":
        raise UserError("--engine only applies with --launch-cmd (it picks the readiness check)")
    sampling = RequestSampling(
        max_tokens=f.max_tokens if f.max_tokens is not None else DEFAULT_MAX_TOKENS,
        max_tokens_overrides_items=f.max_tokens is not None,
        temperature=f.temperature if f.temperature is not None else 0.0,
        seed=f.seed if f.seed is not None else 0,
        ignore_eos=bool(f.ignore_eos),
    )
    output = Path(f.output) if f.output else Path(datetime.now(timezone.utc).strftime("diagnose-%Y%m%d-%H%M%S"))
    RunDir.check(output)
    return DiagnoseConfig(
        endpoint=ep,
        output_dir=output,
        workload=f.workload or "builtin:mixed",
        workload_default=not f.workload,
        num_prompts=f.num_prompts if f.num_prompts is not None else 16,
        concurrency=f.concurrency if f.concurrency is not None else 1,
        trace_speed=f.trace_speed,
        workers=f.workers or 1,
        ray=f.ray,
        sampling=sampling,
        seed=f.seed if f.seed is not None else 0,
        probe_seed=f.probe_seed,
        max_model_len=f.max_model_len,
        max_prompt_tokens=f.max_prompt_tokens,
        sweep_points=f.sweep_points,
        sweep_repeats=f.sweep_repeats,
        idle_s=f.idle,
        prefix_tokens=f.prefix_tokens,
        launch=launch,
        scrape=f.scrape,
        command=redact_command(argv),
    )
