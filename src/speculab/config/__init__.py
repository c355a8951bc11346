"""The experiment file: YAML in (`load`), validated at the edge (`schema`), out as frozen dataclasses (`experiment`).

It knows nothing about the harness, the engine or the report: they read these configs; it imports none of them.
"""

from speculab.config.experiment import (
    DEFAULT_MAX_TOKENS,
    ENGINE_KINDS,
    KNOWN_METHODS,
    NEEDS_MODEL,
    AdaptiveRepeats,
    ArmConfig,
    ArmPrice,
    CandidateConfig,
    CostConfig,
    EngineKind,
    Experiment,
    LaunchConfig,
    LoadLevel,
    LoadPhase,
    LoadsConfig,
    SamplingConfig,
    SearchConfig,
    SloTargets,
    SpecMethod,
    SpeculationConfig,
    WorkloadConfig,
)
from speculab.config.load import load_experiment, parse_experiment, resolve_workload_path

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "ENGINE_KINDS",
    "KNOWN_METHODS",
    "NEEDS_MODEL",
    "AdaptiveRepeats",
    "ArmConfig",
    "ArmPrice",
    "CandidateConfig",
    "CostConfig",
    "EngineKind",
    "Experiment",
    "LaunchConfig",
    "LoadLevel",
    "LoadPhase",
    "LoadsConfig",
    "SamplingConfig",
    "SearchConfig",
    "SloTargets",
    "SpecMethod",
    "SpeculationConfig",
    "WorkloadConfig",
    "load_experiment",
    "parse_experiment",
    "resolve_workload_path",
]
