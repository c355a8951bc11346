"""What `speculab diagnose` measures and how hard (`DiagnoseConfig`, checked before any request), and what it
returns (`DiagnoseResult`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from speculab.commands.diagnose import analysis as dg
from speculab.commands.diagnose.causes import (
    Thresholds,
)
from speculab.errors import UserError
from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
from speculab.harness.records import RequestRecord
from speculab.harness.servers.process import ServerCommand


@dataclass(frozen=True, slots=True)
class DiagnoseConfig:
    """What to measure and how hard. Token counts are approximate (speculab's own count) when generated."""

    endpoint: EndpointConfig  # model "" means: the only model the server serves
    output_dir: Path | None = None  # None: nothing written (library use)
    workload: str = "builtin:mixed"  # the user's workload, for decode share and queueing
    workload_default: bool = False  # the user named none: built-in prompts too long for the context are left out
    workload_left_out: int = 0  # set by the run: built-in prompts of the default workload too long for the context
    num_prompts: int = 16  # workload requests at concurrency 1 (and at least 2 x concurrency at load)
    concurrency: int = 1  # the operating point; 1: queueing is not measured (with a trace: a cap above 1)
    # a trace:PATH workload: the operating point replays the whole trace at its arrival times, this many times as fast
    # (None: 1 for a trace workload); the concurrency-1 phase takes its first num_prompts requests
    trace_speed: float | None = None
    workers: int = 1  # client processes offering the operating point's load (load.coordinator)
    ray: str | None = None  # those workers as Ray actors on this cluster (load.ray_pool): auto | local | an address
    sampling: RequestSampling = field(default_factory=RequestSampling)  # for the workload phases
    seed: int = 0  # the workload's per-request seeds
    probe_seed: int | None = None  # synthetic probe text; None: fresh for every run (see module doc)
    max_model_len: int | None = None  # None: from /v1/models (max_model_len), else an error before any load
    max_prompt_tokens: int | None = None  # cap on the sweep's longest prompt (default: what the context allows)
    sweep_points: int = 6
    sweep_repeats: int = 3
    min_prompt_tokens: int = 16
    cold_probe_tokens: int = 32
    warm_probes: int = 3
    idle_s: float = 0.0  # > 0: one more probe after this long idle (scale-to-zero, evicted caches)
    prefix_tokens: int | None = None  # None: half the longest sweep prompt
    prefix_repeats: int = 3
    launch: ServerCommand | None = None  # start (and stop) the server ourselves: times start-up and first token
    scrape: bool = True
    thresholds: Thresholds = field(default_factory=Thresholds)
    command: tuple[str, ...] = ()  # argv, already redacted

    def __post_init__(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise UserError(msg)

        need(self.concurrency >= 1, f"--concurrency must be at least 1, got {self.concurrency}")
        need(self.workers >= 1, f"--workers must be at least 1, got {self.workers}")
        need(
            self.workers == 1 or self.trace_speed is not None or self.concurrency >= self.workers,
            f"--workers {self.workers} needs --concurrency of at least {self.workers} (one stream per worker)",
        )
        if self.ray is not None:
            from speculab.harness.load.ray_pool import check_address

            check_address(self.ray)
        need(
            self.trace_speed is None or 0 < self.trace_speed < float("inf"),
            f"--trace-speed must be a positive number, got {self.trace_speed}",
        )
        need(self.num_prompts >= 2, f"--num-prompts must be at least 2, got {self.num_prompts}")
        need(self.sweep_points >= 3, f"--sweep-points must be at least 3 (a line needs them), got {self.sweep_points}")
        need(self.sweep_repeats >= 1, f"--sweep-repeats must be at least 1, got {self.sweep_repeats}")
        need(self.warm_probes >= 2, f"--warm-probes must be at least 2, got {self.warm_probes}")
        need(self.idle_s >= 0, f"--idle must be >= 0 seconds, got {self.idle_s}")
        need(self.prefix_repeats >= 2, f"--prefix-repeats must be at least 2, got {self.prefix_repeats}")
        need(self.min_prompt_tokens >= 1, "--min-prompt-tokens must be >= 1")
        for name in ("max_model_len", "max_prompt_tokens", "prefix_tokens"):
            v = getattr(self, name)
            need(v is None or v >= 2, f"--{name.replace('_', '-')} must be at least 2, got {v}")
        need(self.probe_seed is None or self.probe_seed >= 0, "--probe-seed must be >= 0")
        need(self.seed >= 0, f"--seed must be >= 0, got {self.seed}")


@dataclass(frozen=True, slots=True)
class DiagnoseResult:
    diagnosis: dg.Diagnosis
    document: dict[str, Any]  # diagnosis.json
    run_dir: Path | None
    interrupted: bool
    records: tuple[RequestRecord, ...]
