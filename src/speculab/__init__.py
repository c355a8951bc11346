"""speculab: does speculative decoding make my endpoint faster and cheaper, at my load, and is it still correct?

The library face: the handful of entry points a Python user needs, named in `__all__` and imported lazily, so that
`import speculab` (which the CLI and the reference engine do for `__version__`) loads nothing else: the engine must
never pull in the harness, and the CLI starts fast.

    from speculab import load_workload, BenchConfig, run_bench            # measure one endpoint
    from speculab import load_experiment, plan_experiment, run_plan       # the A/B experiment
    from speculab import load_inputs, build_report, render_run_dir        # build or read a report
    from speculab import DiagnoseConfig, diagnose_endpoint                # which latency problem is this?
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"
NAME = "speculab"  # the program's own name: the CLI's, its cache directory's, the key of its version in a manifest

# name -> the module that defines it (the one place each lives)
_EXPORTS: dict[str, str] = {
    # workloads
    "load_workload": "speculab.harness.workload.sources",
    "Workload": "speculab.harness.workload.items",
    "RequestSpec": "speculab.harness.records",
    "RequestRecord": "speculab.harness.records",
    # measure one endpoint (`speculab bench`)
    "EndpointConfig": "speculab.harness.client.endpoint",
    "RequestSampling": "speculab.harness.client.endpoint",
    "LoadConfig": "speculab.harness.load.runner",
    "BenchConfig": "speculab.commands.bench.run",
    "BenchResult": "speculab.commands.bench.run",
    "run_bench": "speculab.commands.bench.run",
    "run_bench_interruptible": "speculab.commands.bench.run",
    # the A/B experiment (`speculab run`)
    "load_experiment": "speculab.config.load",
    "parse_experiment": "speculab.config.load",
    "plan_experiment": "speculab.commands.run.plan",
    "run_plan": "speculab.commands.run.run",
    "run_plan_interruptible": "speculab.commands.run.run",
    "RunOutcome": "speculab.commands.run.run",
    # reports (`speculab report`, `compare`)
    "load_inputs": "speculab.harness.results.ab_dir",
    "save_inputs": "speculab.harness.results.ab_dir",
    "inputs_from_bench_dirs": "speculab.commands.compare.pairing",
    "inputs_from_results": "speculab.commands.compare.pairing",  # bench directories or vLLM bench serve files
    "build_report": "speculab.harness.verdict.build",
    "render_run_dir": "speculab.report.render",
    # diagnose (`speculab diagnose`)
    "DiagnoseConfig": "speculab.commands.diagnose.config",
    "run_diagnosis": "speculab.commands.diagnose.run",
    "diagnose_endpoint": "speculab.commands.diagnose.run",
    # errors every entry point raises for a mistake the user can fix
    "UserError": "speculab.errors",
    "EndpointError": "speculab.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'speculab' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # imported once
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
