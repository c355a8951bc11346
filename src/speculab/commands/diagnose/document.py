"""diagnosis.json: the schema, the headline numbers first, then every check in full and the options that produced it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from speculab.commands.diagnose import analysis as dg
from speculab.commands.diagnose.causes import SCHEMA
from speculab.commands.diagnose.config import DiagnoseConfig
from speculab.harness.analysis.figures import TPOT
from speculab.harness.client.endpoint import EndpointConfig
from speculab.harness.results.warnings import ReportWarning, WarningKind


def diagnose_options(
    cfg: DiagnoseConfig, context: int, lengths: Sequence[int], probe_seed: int, prefix: int, prefix_total: int
) -> dict[str, Any]:
    return {
        "workload": cfg.workload,
        "workload_left_out": cfg.workload_left_out,
        "num_prompts": cfg.num_prompts,
        "concurrency": cfg.concurrency,
        "trace_speed": cfg.trace_speed,
        "workers": cfg.workers,
        "ray": cfg.ray,
        "sampling": dataclasses.asdict(cfg.sampling),
        "seed": cfg.seed,
        "probe_seed": probe_seed,
        "max_model_len": context,
        "sweep_lengths": list(lengths),
        "sweep_repeats": cfg.sweep_repeats,
        "cold_probe_tokens": cfg.cold_probe_tokens,
        "warm_probes": cfg.warm_probes,
        "idle_s": cfg.idle_s,
        "prefix_tokens": prefix,
        "prefix_prompt_tokens": prefix_total,
        "prefix_repeats": cfg.prefix_repeats,
        "thresholds": dataclasses.asdict(cfg.thresholds),
    }


def build_document(
    d: dg.Diagnosis,
    cfg: DiagnoseConfig,
    ep: EndpointConfig,
    context: int,
    lengths: Sequence[int],
    probe_seed: int,
    prefix: int,
    prefix_total: int,
    interrupted: bool,
) -> dict[str, Any]:
    """diagnosis.json: schema, the headline numbers (issue 6's keys) first, then every check in full."""
    fit = d.prefill.fit
    body = d.to_dict()
    headline = {
        "prefill_s_per_token": fit.s_per_token if fit else None,
        "prefill_tokens_per_s": fit.tokens_per_s if fit else None,
        "prefill_overhead_s": fit.overhead_s if fit else None,
        "cold_start_s": d.cold_start.cold_start_s,
        "decode_share": d.decode.decode_share if d.decode else None,
        TPOT.name: d.decode.tpot_s if d.decode else None,
        "queueing_wait_s": d.queueing.wait_s,
        "prefix_caching": d.prefix_caching.enabled,
        "top_finding": d.findings[0].cause if d.findings else None,
    }
    doc = {
        "schema": SCHEMA,
        "interrupted": interrupted,
        "summary": headline,
        **body,
        "options": diagnose_options(cfg, context, lengths, probe_seed, prefix, prefix_total),
    }
    if cfg.workload_left_out:
        fields = {"left_out": cfg.workload_left_out, "context": context, "max_tokens": cfg.sampling.max_tokens}
        left_out = ReportWarning(WarningKind.BUILTIN_PROMPTS_LEFT_OUT, fields=fields)
        doc["warnings"] = [*doc["warnings"], left_out.to_dict()]
    return doc
