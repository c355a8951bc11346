"""`speculab bench` flags -> validated configs, workload and token counter. Every mistake is a UserError line,
raised before any request is sent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from speculab.commands.bench.run import BenchConfig
from speculab.config import DEFAULT_MAX_TOKENS, SloTargets
from speculab.errors import UserError, did_you_mean
from speculab.harness.analysis.metrics import StallConfig
from speculab.harness.client.endpoint import (
    EndpointConfig,
    RequestSampling,
    TokenCounter,
    check_items,
    parse_extra_body,
    resolve_api_key,
)
from speculab.harness.load.arrivals import ArrivalConfig
from speculab.harness.load.runner import LoadConfig
from speculab.harness.records import RequestSpec
from speculab.harness.servers.adapters.flags import redact_command
from speculab.harness.workload.fit import FitConfig, pool_size, take


@dataclass(frozen=True, slots=True)
class BenchFlags:
    """`speculab bench`'s flags as the CLI parsed them (seconds and counts as typed; nothing checked yet): the CLI's
    defaults, held equal to these by tests/unit/test_cli_flags.py."""

    url: str
    output: Path
    model: str = ""
    api: str = "completions"
    workload: str = "builtin:mixed"
    num_prompts: int | None = None
    concurrency: int | None = None
    rate: float | None = None
    trace_speed: float | None = None
    workers: int = 1
    ray: str | None = None
    arrival: str = "poisson"
    burstiness: float = 1.0
    duration: float | None = None
    warmup: int = 0
    ramp_up: float = 0.0
    max_tokens: int | None = None
    fit: str = "skip"
    max_model_len: int | None = None
    temperature: float = 0.0
    top_p: float | None = None
    seed: int = 0
    ignore_eos: bool = False
    stream: bool = True
    timeout: float = 600.0
    include_usage: bool = True
    continuous_usage: bool = True
    logprobs: int | None = None
    extra_body: str | None = None
    api_key: str | None = None
    tokenizer: str | None = None
    slo_ttft: float | None = None
    slo_tpot: float | None = None
    slo_e2e: float | None = None
    stall_threshold: float = 0.2
    stall_k: float = 3.0
    scrape: bool = True
    max_error_rate: float = 0.02


def _positive(name: str, v: float | None) -> None:
    if v is not None and not v > 0:
        raise UserError(f"{name} must be positive seconds, got {v}")


def trace_speed_for(items: Sequence[RequestSpec], speed: float | None) -> float | None:
    """A trace workload is replayed at its arrival times (speed 1 unless given); --trace-speed needs a trace."""
    if any(it.arrival_s is not None for it in items):
        return 1.0 if speed is None else speed
    if speed is not None:
        raise UserError("--trace-speed scales a trace's arrival times; use it with --workload trace:PATH")
    return None


def bench_config_from_flags(
    f: BenchFlags, argv: Sequence[str] = ()
) -> tuple[BenchConfig, tuple[RequestSpec, ...], TokenCounter | None]:
    """Validate every flag, load the workload and tokenizer; nothing touches the network."""
    from speculab.harness.workload.sources import load_workload

    _check_flags(f)
    arrival = _arrival_from_flags(f)
    # a duration-bounded run cycles the workload itself; otherwise the whole set is loaded, so that prompts too
    # long for the server's context can be left out and replaced before --num-prompts are taken (workload.fit)
    n_load = None if f.duration is not None else pool_size(f.workload, f.num_prompts)
    wl = load_workload(f.workload, seed=f.seed, num_prompts=n_load, api=f.api)
    fit = FitConfig(f.fit, f.max_model_len)
    load = _load_from_flags(f, arrival, trace_speed_for(wl.items, f.trace_speed))
    endpoint = _endpoint_from_flags(f)
    sampling = _sampling_from_flags(f)
    check_items(wl.items, endpoint)
    workers, ray = f.workers, f.ray
    _check_workers(take(wl.items, f.num_prompts, f.seed), load, workers, ray)
    count_tokens = _token_counter_from_flag(f.tokenizer)
    output = Path(f.output)
    from speculab.harness.results.run_dir import RunDir

    RunDir.check(output)
    cfg = BenchConfig(
        endpoint=endpoint,
        sampling=sampling,
        load=load,
        output_dir=output,
        workload={
            "spec": f.workload,
            "name": wl.name,
            "source": wl.source,
            "n_items": len(wl.items),
            "synthesised": wl.synthesised,
        },
        stall=StallConfig(f.stall_threshold, f.stall_k),
        slo=SloTargets(f.slo_ttft, f.slo_tpot, f.slo_e2e),
        tokenizer=f.tokenizer,
        scrape=f.scrape,
        command=redact_command(argv),
        workers=workers,
        ray=ray,
        fit=fit,
    )
    return cfg, wl.items, count_tokens


def _check_flags(f: BenchFlags) -> None:
    """The flags that stand on their own: the API, the seed, positive seconds, stall and logprob counts."""
    if f.api not in ("completions", "chat"):
        raise UserError(
            f"--api must be 'completions' or 'chat', not {f.api!r}" + did_you_mean(f.api, ("completions", "chat"))
        )
    if f.seed < 0:
        raise UserError(f"--seed must be >= 0, got {f.seed}")
    for name in ("--slo-ttft", "--slo-tpot", "--slo-e2e", "--stall-threshold", "--timeout"):
        _positive(name, getattr(f, name[2:].replace("-", "_")))
    if f.stall_k < 1:
        raise UserError(f"--stall-k must be >= 1, got {f.stall_k}")
    if f.logprobs is not None and f.logprobs < 0:
        raise UserError(f"--logprobs must be >= 0, got {f.logprobs}")


def _arrival_from_flags(f: BenchFlags) -> ArrivalConfig | None:
    """The open-loop arrivals (--rate, --arrival, --burstiness); None: closed loop or a trace's own times."""
    if f.rate is None and (f.arrival != "poisson" or f.burstiness != 1.0):
        raise UserError("--arrival and --burstiness shape open-loop load; add --rate R")
    return None if f.rate is None else ArrivalConfig(f.rate, f.arrival, f.burstiness)


def _load_from_flags(f: BenchFlags, arrival: ArrivalConfig | None, trace_speed: float | None) -> LoadConfig:
    """The offered load; with neither a rate nor a trace, one request at a time unless --concurrency says more."""
    concurrency = f.concurrency
    if concurrency is None and arrival is None and trace_speed is None:
        concurrency = 1
    return LoadConfig(
        concurrency=concurrency,
        arrival=arrival,
        num_prompts=f.num_prompts,
        duration_s=f.duration,
        warmup=f.warmup,
        seed=f.seed,
        ramp_up_s=f.ramp_up,
        trace_speed=trace_speed,
    )


def _endpoint_from_flags(f: BenchFlags) -> EndpointConfig:
    """Where and how requests go: URL, model, API, streaming, key, timeout, usage and logprob options, extra body."""
    return EndpointConfig(
        base_url=f.url,
        model=f.model,
        api=f.api,
        stream=f.stream,
        api_key=resolve_api_key(f.api_key),
        timeout_s=f.timeout,
        include_usage=f.include_usage,
        continuous_usage_stats=f.continuous_usage and f.include_usage,
        logprobs=f.logprobs,
        extra_body=MappingProxyType(parse_extra_body(f.extra_body)),
    )


def _sampling_from_flags(f: BenchFlags) -> RequestSampling:
    """--max-tokens (overriding the items' own when given), temperature, top-p, seed, ignore-eos."""
    return RequestSampling(
        max_tokens=f.max_tokens if f.max_tokens is not None else DEFAULT_MAX_TOKENS,
        max_tokens_overrides_items=f.max_tokens is not None,
        temperature=f.temperature,
        top_p=f.top_p,
        seed=f.seed,
        ignore_eos=f.ignore_eos,
    )


def _check_workers(items: Sequence[RequestSpec], load: LoadConfig, workers: int, ray: str | None) -> None:
    """--workers / --ray: the split planned now, and the Ray address checked, so a mistake stops the run here."""
    if workers > 1 or ray is not None:
        from speculab.harness.load.worker_plan import plan_workers

        plan_workers(items, load, workers)  # every mistake (too few prompts or streams, --duration) now
    if ray is not None:
        from speculab.harness.load.ray_pool import check_address

        check_address(ray)


def _token_counter_from_flag(tokenizer: str | None) -> TokenCounter | None:
    """--tokenizer: a local tokenizer for per-chunk token counts; None without one."""
    if not tokenizer:
        return None
    from speculab.harness.client.token_counter import load_token_counter

    return load_token_counter(tokenizer)
