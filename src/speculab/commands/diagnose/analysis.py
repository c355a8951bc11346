"""Pure analysis for `speculab diagnose`: measured phases -> cold start, prefill fit, prefix caching, queueing and
decode share -> findings ranked by how much latency each explains. Seconds everywhere; no I/O, no clock.

Each cause is measured in the same currency, `explained_s`: the seconds it adds to a request it affects.
- decode: E2E - TTFT at the operating point (the part speculative decoding can shorten);
- prefill: fitted seconds per prompt token x the workload's mean prompt tokens (the part of TTFT due to length);
- queueing: TTFT at the operating point - TTFT at concurrency 1, plus client-side wait;
- cold start: process start -> first token when speculab launched the server, else the first request's (or the
  first after an idle period) TTFT above warm TTFT. It hits only those requests; `affects` says so.
A cause is a finding when it explains at least `min_effect_s` and `min_share` of the affected request's latency
(and, where it is estimated with an interval, the interval excludes zero). Findings are ranked by `explained_s`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from speculab.commands.diagnose.causes import (
    PHASE_BASELINE,
    PHASE_LOAD,
    ColdStart,
    DecodeShare,
    Inputs,
    LoadPoint,
    Prefill,
    PrefixCaching,
    Queueing,
    ServerPhase,
    Thresholds,
    cold_start,
    decode_share,
    load_point,
    mean_of,
    measures_load,
    ok_records,
    operating_point,
    prefill,
    prefix_caching,
    queueing,
    ttfts_of,
)
from speculab.harness.analysis.metrics import request_metrics
from speculab.harness.records import RequestRecord
from speculab.harness.results.warnings import FindingKind, ReportWarning, WarningKind
from speculab.harness.stats import CONFIDENCE


@dataclass(frozen=True, slots=True)
class Finding:
    """A cause and what it costs; its title, whom it affects, its evidence and the next step are worded by the report
    from `fields` (`report.words.finding_words`), as a warning's sentence is from its record's."""

    cause: FindingKind
    explained_s: float  # seconds this cause adds to a request it affects
    share: float  # explained_s / latency of such a request
    fields: Mapping[str, Any] = field(default_factory=dict)  # the numbers its words are made from (FindingKind)
    rank: int = 0  # 1 = explains the most latency; 0 = not a finding (below the thresholds)

    def to_dict(self) -> dict[str, Any]:
        """diagnosis.json /2's shape: `cause`, the seconds, `fields` (a /1 file held the sentences instead)."""
        return {
            "cause": self.cause.value,
            "explained_s": self.explained_s,
            "share": self.share,
            "fields": dict(self.fields),
            "rank": self.rank,
        }


@dataclass(frozen=True, slots=True)
class Diagnosis:
    findings: tuple[Finding, ...]  # ranked, most latency first
    checked: tuple[Finding, ...]  # causes measured and found below the thresholds (rank 0)
    cold_start: ColdStart
    prefill: Prefill
    prefix_caching: PrefixCaching
    queueing: Queueing
    decode: DecodeShare | None
    baseline: LoadPoint | None  # the workload at concurrency 1
    operating: LoadPoint | None  # the workload at the operating point (None: not measured)
    # suggest prefill/decode disaggregation (worded with its cost by the report): only when interference was measured
    disaggregation: bool
    warnings: tuple[ReportWarning, ...]
    server: Mapping[str, ServerPhase] = field(default_factory=dict)
    phases: Mapping[str, Sequence[RequestRecord]] = field(default_factory=dict, repr=False)

    def server_vs_client(self, phases: Mapping[str, Sequence[RequestRecord]]) -> dict[str, dict[str, Any]]:
        """Per phase with server metrics: what the server says beside what the client measured. The client's TTFT
        includes the network and HTTP handling the server does not see; prompt token counts should match exactly."""
        out = {}
        for name, srv in self.server.items():
            ok = ok_records(phases.get(name, ()))
            ms = [request_metrics(r) for r in ok]
            tpots = [m.tpot_s for m in ms if m.tpot_s is not None]
            prompts = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
            out[name] = {
                "server": srv.to_dict(),
                "client_requests_ok": len(ok),
                "client_ttft_mean_s": mean_of(ttfts_of(ok)) if ok else None,
                "client_tpot_mean_s": mean_of(tpots) if tpots else None,
                "client_prompt_tokens": sum(prompts) if len(prompts) == len(ok) else None,
            }
        return out

    def to_dict(self) -> dict[str, Any]:
        """diagnosis.json's measured part (the orchestrator adds run metadata)."""
        fit = self.prefill.fit
        pre: dict[str, Any] = {
            "s_per_token": fit.s_per_token if fit else None,
            "s_per_token_ci": list(fit.s_per_token_ci) if fit else None,
            "tokens_per_s": fit.tokens_per_s if fit else None,
            "tokens_per_s_ci": list(fit.tokens_per_s_ci) if fit else None,
            "overhead_s": fit.overhead_s if fit else None,
            "overhead_s_ci": list(fit.overhead_s_ci) if fit else None,
            "r2": fit.r2 if fit else None,
            "residual_s": fit.residual_s if fit else None,
            "n": len(self.prefill.points),
            "token_source": self.prefill.token_source,
            "by_length": list(self.prefill.by_length),
            "points": [list(p) for p in self.prefill.points],
            "confidence": CONFIDENCE,
        }
        q = asdict(self.queueing)
        return {
            "findings": [f.to_dict() for f in self.findings],
            "checked": [f.to_dict() for f in self.checked],
            "cold_start": asdict(self.cold_start),
            "prefill": pre,
            "prefix_caching": asdict(self.prefix_caching),
            "queueing": q,
            "decode": asdict(self.decode) if self.decode else None,
            "workload": {
                "concurrency_1": asdict(self.baseline) if self.baseline else None,
                "operating_point": asdict(self.operating) if self.operating else None,
            },
            "disaggregation": self.disaggregation,
            "server_metrics": self.server_vs_client(self.phases),
            "warnings": [w.to_dict() for w in self.warnings],
        }


def _matters(explained: float, total: float, th: Thresholds) -> bool:
    """Big enough to report: at least `min_effect_s` seconds and `min_share` of the latency it is part of."""
    return math.isfinite(explained) and explained >= th.min_effect_s and total > 0 and explained / total >= th.min_share


def analyze(inp: Inputs, approx_tokens: Mapping[int, int] | None = None) -> Diagnosis:
    """Every check, then the findings ranked by explained latency."""
    m = _measure_causes(inp, approx_tokens)
    candidates = _candidates(m)
    noise = _indistinct(m)

    def is_finding(f: Finding) -> bool:
        total = f.explained_s / f.share if f.share and f.share > 0 else math.nan
        return f.cause not in noise and _matters(f.explained_s, total, inp.thresholds)

    found = sorted((f for f in candidates if is_finding(f)), key=lambda f: -f.explained_s)
    return Diagnosis(
        findings=tuple(_with_rank(f, i + 1) for i, f in enumerate(found)),
        checked=tuple(f for f in candidates if not is_finding(f)),
        cold_start=m.cold_start,
        prefill=m.prefill,
        prefix_caching=m.prefix_caching,
        queueing=m.queueing,
        decode=m.decode,
        baseline=m.baseline,
        operating=m.load,
        disaggregation=m.queueing.interference,
        warnings=_warnings(inp, m.prefill),
        server=dict(inp.server),
        phases=inp.phases,
    )


@dataclass(frozen=True, slots=True)
class _Causes:
    """Every cause measured from the phases, with what the findings derive from them."""

    cold_start: ColdStart
    prefill: Prefill
    prefix_caching: PrefixCaching
    baseline: LoadPoint | None  # the workload at concurrency 1
    load: LoadPoint | None  # the workload at the operating point (None: not measured)
    prompt_mean: float | None  # the workload's mean prompt tokens
    prefill_req_s: float | None  # the prefill seconds of such a prompt (fitted slope x prompt_mean)
    queueing: Queueing
    decode: DecodeShare | None

    @property
    def operating(self) -> LoadPoint | None:
        """The operating point: the load phase when measured, else concurrency 1."""
        return self.load or self.baseline


def _measure_causes(inp: Inputs, approx_tokens: Mapping[int, int] | None) -> _Causes:
    cs = cold_start(inp)
    pf = prefill(inp, approx_tokens)
    pc = prefix_caching(inp, pf.fit)
    c1 = load_point(inp.phases.get(PHASE_BASELINE, ()), 1)
    load = load_point(inp.phases.get(PHASE_LOAD, ()), inp.concurrency) if measures_load(inp) else None
    op = load or c1
    prompt_mean = c1.prompt_tokens if c1 and c1.prompt_tokens is not None else inp.workload_prompt_tokens
    fit = pf.fit
    prefill_req_s = fit.s_per_token * prompt_mean if fit is not None and prompt_mean is not None else None
    qu = queueing(inp, c1, load, prefill_req_s)
    dec = decode_share(op, operating_point(inp) if load is not None else "concurrency 1") if op is not None else None
    return _Causes(cs, pf, pc, c1, load, prompt_mean, prefill_req_s, qu, dec)


def _warnings(inp: Inputs, pf: Prefill) -> tuple[ReportWarning, ...]:
    """Failed requests per phase, a prefill that is not linear in prompt length, approximate token counts."""
    warnings: list[ReportWarning] = []
    for name, recs in inp.phases.items():
        bad = [r for r in recs if not r.ok and not r.warmup]
        if bad:
            first = bad[0].error
            msg = first.message[:160] if first is not None else ""
            fields = {"phase": name, "failed": len(bad), "sent": len(recs), "first": msg}
            warnings.append(ReportWarning(WarningKind.PHASE_REQUESTS_FAILED, fields=fields))
    fit = pf.fit
    if fit is not None and fit.r2 < 0.8:
        warnings.append(ReportWarning(WarningKind.PREFILL_NOT_LINEAR, fields={"r2": fit.r2}))
    if pf.token_source == "approximate":
        warnings.append(ReportWarning(WarningKind.PROMPT_TOKENS_APPROXIMATE))
    return tuple(warnings)


def _candidates(m: _Causes) -> list[Finding]:
    """One candidate finding per cause that was measured, in the order decode, prefill, queueing, cold start."""
    op = m.operating
    e2e = op.e2e_s if op is not None else math.nan
    candidates: list[Finding] = []
    if m.decode is not None:
        candidates.append(_decode_finding(m.decode))
    fit = m.prefill.fit
    if fit is not None and m.prefill_req_s is not None:
        candidates.append(_prefill_finding(m, e2e))
    qu = m.queueing
    if qu.measured and qu.wait_s is not None:
        candidates.append(_queueing_finding(qu, e2e))
    if m.cold_start.cold_start_s is not None:
        candidates.append(_cold_start_finding(m.cold_start, m.baseline))
    return candidates


def _indistinct(m: _Causes) -> set[FindingKind]:
    """Causes measured but not distinguishable from noise: never findings."""
    noise: set[FindingKind] = set()
    fit = m.prefill.fit
    if fit is not None and not (math.isfinite(fit.s_per_token_ci[0]) and fit.s_per_token_ci[0] > 0):
        noise.add(FindingKind.PREFILL)  # the prompt-length cost is not distinguishable from zero
    qu = m.queueing
    if qu.wait_s_ci is not None and not qu.wait_s_ci[0] > 0:
        noise.add(FindingKind.QUEUEING)  # the extra TTFT at load is not distinguishable from zero
    cs = m.cold_start
    if not (cs.detected or cs.mode == "launch"):
        noise.add(FindingKind.COLD_START)  # within the warm requests' spread
    return noise


def _decode_finding(dec: DecodeShare) -> Finding:
    return Finding(FindingKind.DECODE, dec.decode_s, dec.decode_share, asdict(dec))


def _prefill_finding(m: _Causes, e2e: float) -> Finding:
    fit, prefill_req_s, prompt_mean = m.prefill.fit, m.prefill_req_s, m.prompt_mean
    assert fit is not None and prefill_req_s is not None and prompt_mean is not None
    fields = {
        "overhead_s": fit.overhead_s,
        "s_per_token": fit.s_per_token,
        "tokens_per_s": fit.tokens_per_s,
        "r2": fit.r2,
        "prompt_tokens": prompt_mean,
        "prefill_s": prefill_req_s,
        "prefix_caching": m.prefix_caching.enabled,  # the next step: use the cache more, or turn it on
    }
    return Finding(FindingKind.PREFILL, prefill_req_s, prefill_req_s / e2e if e2e > 0 else math.nan, fields)


def _queueing_finding(qu: Queueing, e2e: float) -> Finding:
    assert qu.wait_s is not None
    explained = max(0.0, qu.wait_s)
    return Finding(FindingKind.QUEUEING, explained, explained / e2e if e2e > 0 else math.nan, asdict(qu))


def _cold_start_finding(cs: ColdStart, c1: LoadPoint | None) -> Finding:
    assert cs.cold_start_s is not None
    warm_e2e = c1.e2e_s if c1 is not None else (cs.warm_ttft_s or 0.0)
    explained = max(0.0, cs.cold_start_s)
    share = explained / (explained + warm_e2e) if explained + warm_e2e > 0 else math.nan
    return Finding(FindingKind.COLD_START, explained, share, asdict(cs))


def _with_rank(f: Finding, rank: int) -> Finding:
    return dataclasses.replace(f, rank=rank)


def sweep_lengths(max_prompt_tokens: int, points: int, min_tokens: int = 16) -> tuple[int, ...]:
    """Prompt lengths for the prefill sweep: `points` lengths from min_tokens to max_prompt_tokens, spaced
    geometrically (short prompts show the fixed overhead, long ones the slope), deduplicated."""
    hi = max(min_tokens, max_prompt_tokens)
    if points <= 1:
        return (hi,)
    xs = np.geomspace(min_tokens, hi, points)
    return tuple(sorted({round(float(x)) for x in xs}))
