"""The pure diagnosis: the line fit and its intervals, each check on hand-made records, and the ranking rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from speculab.commands.diagnose import analysis as dg
from speculab.commands.diagnose.causes import (
    PHASE_BASELINE,
    PHASE_COLD,
    PHASE_IDLE,
    PHASE_LOAD,
    PHASE_PREFILL,
    PHASE_PREFIX_CONTROL,
    PHASE_PREFIX_SHARED,
    PHASE_WARM,
    Inputs,
    ServerPhase,
    Startup,
    cold_start,
    prefill,
    prefix_caching,
)
from speculab.harness.records import ChunkEvent, ErrorCategory, ErrorInfo, RequestRecord, TokenCountSource
from speculab.harness.results.warnings import WarningKind
from speculab.harness.stats import LinearFit, fit_line, welch_diff
from speculab.report.phrases import warning_text
from speculab.report.words import disaggregation_text, finding_words


def rec(
    index: int,
    ttft_s: float,
    *,
    tokens: int = 1,
    gap_s: float = 0.01,
    prompt_tokens: int | None = 10,
    queue_s: float = 0.0,
    t0: float = 100.0,
    error: bool = False,
) -> RequestRecord:
    """A streamed request: sent at t0 (scheduled queue_s earlier), first chunk after ttft_s, then one token per
    chunk every gap_s."""
    if error:
        err = ErrorInfo(ErrorCategory.HTTP, "boom", 500)
        return RequestRecord(index=index, scheduled_s=t0 - queue_s, sent_s=t0, end_s=t0 + 0.01, error=err)
    chunks = tuple(ChunkEvent(t0 + ttft_s + i * gap_s, "w ", 1) for i in range(tokens))
    return RequestRecord(
        index=index,
        scheduled_s=t0 - queue_s,
        sent_s=t0,
        end_s=chunks[-1].t_s,
        chunks=chunks,
        prompt_tokens=prompt_tokens,
        completion_tokens=tokens,
        token_count_source=TokenCountSource.CONTINUOUS_USAGE,
    )


def sweep(s_per_token: float, overhead_s: float, noise_s: float = 0.0, seed: int = 0) -> list[RequestRecord]:
    rng = np.random.default_rng(seed)
    lengths = [16, 64, 256, 1024, 2048] * 3
    return [
        rec(i, overhead_s + s_per_token * n + float(rng.normal(0, noise_s)), prompt_tokens=n)
        for i, n in enumerate(lengths)
    ]


# --- the fit ------------------------------------------------------------------------------------------------------


def test_fit_line_exact_data_recovers_line_with_tight_interval() -> None:
    x = [10, 20, 40, 80]
    fit = fit_line(x, [0.05 + 0.001 * v for v in x])
    assert fit is not None
    assert fit.s_per_token == pytest.approx(0.001) and fit.overhead_s == pytest.approx(0.05)
    assert fit.tokens_per_s == pytest.approx(1000) and fit.r2 == pytest.approx(1.0)
    assert fit.s_per_token_ci[1] - fit.s_per_token_ci[0] < 1e-9


def test_fit_line_interval_covers_truth_about_95_percent() -> None:
    rng = np.random.default_rng(1)
    x = np.array([16, 64, 256, 1024, 2048] * 2, dtype=float)
    covered = 0
    for _ in range(400):
        y = 0.03 + 2e-4 * x + rng.normal(0, 0.01, x.size)
        fit = fit_line(x, y)
        assert fit is not None
        covered += fit.s_per_token_ci[0] <= 2e-4 <= fit.s_per_token_ci[1]
    assert 0.92 <= covered / 400 <= 0.98


def test_fit_line_needs_three_points_and_varying_x() -> None:
    assert fit_line([1, 2], [1, 2]) is None
    assert fit_line([5, 5, 5], [1, 2, 3]) is None


def test_rate_interval_is_inverted_and_open_when_slope_may_be_zero() -> None:
    fit = LinearFit(0.001, (0.0005, 0.002), 0.0, (0.0, 0.0), 1.0, 5, 0.0)
    assert fit.tokens_per_s_ci == pytest.approx((500, 2000))
    flat = LinearFit(0.001, (-0.0005, 0.002), 0.0, (0.0, 0.0), 1.0, 5, 0.0)
    assert flat.tokens_per_s_ci[1] == math.inf


def test_welch_diff_sign_and_interval() -> None:
    d, lo, hi = welch_diff([1.0, 1.1, 0.9], [0.5, 0.6, 0.4])
    assert d == pytest.approx(0.5) and lo < 0.5 < hi and lo > 0


def test_sweep_lengths_geometric_distinct_and_bounded() -> None:
    xs = dg.sweep_lengths(4000, 6)
    assert xs[0] == 16 and xs[-1] == 4000 and len(xs) == 6 and list(xs) == sorted(set(xs))
    assert dg.sweep_lengths(20, 6) == tuple(sorted(set(dg.sweep_lengths(20, 6))))


# --- the checks ---------------------------------------------------------------------------------------------------


def inputs(**phases: list[RequestRecord]) -> Inputs:
    key = {k: k.replace("_", "-") for k in phases}
    return Inputs(phases={key[k]: v for k, v in phases.items()})


def test_prefill_uses_server_counts_and_falls_back_to_approximate() -> None:
    p = prefill(Inputs(phases={PHASE_PREFILL: sweep(5e-4, 0.02, 0.002)}))
    assert p.token_source == "usage" and p.fit is not None
    assert p.fit.s_per_token == pytest.approx(5e-4, rel=0.05)
    assert [r["prompt_tokens"] for r in p.by_length] == [16, 64, 256, 1024, 2048]
    no_usage = [rec(i, 0.02 + 1e-3 * n, prompt_tokens=None) for i, n in enumerate([10, 100, 1000])]
    p2 = prefill(Inputs(phases={PHASE_PREFILL: no_usage}), approx_tokens={0: 10, 1: 100, 2: 1000})
    assert p2.token_source == "approximate" and p2.fit is not None and p2.fit.s_per_token == pytest.approx(1e-3)


def test_cold_start_running_server_first_and_after_idle() -> None:
    inp = Inputs(
        phases={
            PHASE_COLD: [rec(0, 0.55)],
            PHASE_WARM: [rec(1, 0.05), rec(2, 0.052), rec(3, 0.048)],
            PHASE_IDLE: [rec(4, 1.05)],
        },
        idle_s=60,
    )
    cs = cold_start(inp)
    assert cs.detected and cs.mode == "running"
    assert cs.first_request_extra_s == pytest.approx(0.5) and cs.after_idle_extra_s == pytest.approx(1.0)
    assert cs.cold_start_s == pytest.approx(1.0)


def test_cold_start_not_detected_within_noise() -> None:
    inp = Inputs(phases={PHASE_COLD: [rec(0, 0.056)], PHASE_WARM: [rec(1, 0.05), rec(2, 0.051)]})
    assert not cold_start(inp).detected


def test_cold_start_launch_mode_reports_process_to_first_token() -> None:
    inp = Inputs(phases={}, startup=Startup(ready_s=12.0, first_token_s=13.5))
    cs = cold_start(inp)
    assert cs.mode == "launch" and cs.cold_start_s == 13.5 and cs.process_ready_s == 12.0


def test_prefix_caching_on_off_and_undetermined() -> None:
    fit = LinearFit(1e-3, (0.9e-3, 1.1e-3), 0.01, (0.0, 0.02), 1.0, 10, 0.001)
    base = dict(prefix_tokens=400, prefix_prompt_tokens=464)
    on = prefix_caching(
        Inputs(
            phases={
                PHASE_PREFIX_SHARED: [rec(i, 0.08 + 0.001 * i, prompt_tokens=464) for i in range(3)],
                PHASE_PREFIX_CONTROL: [rec(i, 0.47 + 0.001 * i, prompt_tokens=464) for i in range(3)],
            },
            **base,
        ),
        fit,
    )
    assert on.enabled is True and on.saving_s == pytest.approx(0.39) and on.expected_saving_s == pytest.approx(0.4)
    off = prefix_caching(
        Inputs(
            phases={
                PHASE_PREFIX_SHARED: [rec(i, 0.47 + 0.002 * i, prompt_tokens=464) for i in range(3)],
                PHASE_PREFIX_CONTROL: [rec(i, 0.47 - 0.002 * i, prompt_tokens=464) for i in range(3)],
            },
            **base,
        ),
        fit,
    )
    assert off.enabled is False
    cheap = LinearFit(1e-6, (0.0, 2e-6), 0.01, (0.0, 0.02), 1.0, 10, 0.001)
    und = prefix_caching(
        Inputs(phases={PHASE_PREFIX_SHARED: [rec(0, 0.01)], PHASE_PREFIX_CONTROL: [rec(1, 0.01)]}, **base),
        cheap,
    )
    assert und.enabled is None and und.undetermined == "too_cheap"


def test_prefix_token_count_is_scaled_to_the_servers_count() -> None:
    # the server counts 10% fewer tokens than speculab's approximation: so does the prefix
    fit = LinearFit(1e-3, (0.9e-3, 1.1e-3), 0.01, (0.0, 0.02), 1.0, 10, 0.001)
    pc = prefix_caching(
        Inputs(
            phases={
                PHASE_PREFIX_SHARED: [rec(i, 0.1, prompt_tokens=450) for i in range(2)],
                PHASE_PREFIX_CONTROL: [rec(i, 0.4, prompt_tokens=450) for i in range(2)],
            },
            prefix_tokens=400,
            prefix_prompt_tokens=500,
        ),
        fit,
    )
    assert pc.prefix_tokens == 360 and pc.expected_saving_s == pytest.approx(0.36)


# --- findings and ranking -----------------------------------------------------------------------------------------


def workload(ttft_s: float, tokens: int, gap_s: float, n: int = 6, queue_s: float = 0.0) -> list[RequestRecord]:
    return [rec(i, ttft_s + 0.001 * (i % 3), tokens=tokens, gap_s=gap_s, prompt_tokens=500, queue_s=queue_s)
            for i in range(n)]  # fmt: skip


def situation(
    *, cold_first: float = 0.05, s_per_token: float = 1e-5, gap_s: float = 0.01, tokens: int = 50,
    ttft_c1: float = 0.06, ttft_load: float | None = None, gap_load: float | None = None,
    server_queue: float | None = None,
) -> dg.Diagnosis:  # fmt: skip
    phases = {
        PHASE_COLD: [rec(0, cold_first)],
        PHASE_WARM: [rec(i, 0.05) for i in range(1, 4)],
        PHASE_PREFILL: sweep(s_per_token, 0.05, 0.0005),
        PHASE_BASELINE: workload(ttft_c1, tokens, gap_s),
    }
    conc = 1
    server = {}
    if ttft_load is not None:
        phases[PHASE_LOAD] = workload(ttft_load, tokens, gap_load or gap_s, n=8)
        conc = 4
        if server_queue is not None:
            server[PHASE_LOAD] = ServerPhase(queue_mean_s=server_queue)
    return dg.analyze(Inputs(phases=phases, concurrency=conc, server=server))


def causes(d: dg.Diagnosis) -> list[str]:
    return [f.cause for f in d.findings]


def test_ranking_decode_dominated() -> None:
    d = situation()
    assert causes(d) == ["decode"]
    assert d.findings[0].rank == 1 and d.findings[0].explained_s == pytest.approx(0.49)
    assert {f.cause.value for f in d.checked} >= {"prefill", "cold_start"}


def test_ranking_prefill_dominated() -> None:
    d = situation(s_per_token=2e-3, ttft_c1=1.05, tokens=5)
    assert causes(d)[0] == "prefill"
    assert d.findings[0].explained_s == pytest.approx(1.0, rel=0.02)  # 2 ms x 500 prompt tokens


def test_ranking_cold_start_dominated() -> None:
    d = situation(cold_first=3.0)
    assert causes(d) == ["cold_start", "decode"]
    assert d.findings[0].explained_s == pytest.approx(2.95)


def test_ranking_queueing_dominated_and_no_disaggregation_when_server_queue_explains_it() -> None:
    d = situation(ttft_load=2.0, server_queue=1.9)
    assert causes(d)[0] == "queueing"
    assert d.queueing.wait_s == pytest.approx(1.94, abs=0.01)
    assert not d.queueing.interference and not d.disaggregation


def test_interference_needs_steady_decode() -> None:
    # TTFT at load 4x TTFT alone, no server queue, prefill per request 0.5 s (3 others in flight could add 1.5 s)
    steady = situation(s_per_token=1e-3, ttft_c1=0.55, ttft_load=1.6, server_queue=0.0)
    assert steady.queueing.interference and steady.disaggregation
    said = disaggregation_text(steady.to_dict())  # the suggestion with its cost, in the report's words
    assert said is not None and "KV cache" in said and "router" in said
    slower_decode = situation(s_per_token=1e-3, ttft_c1=0.55, ttft_load=1.6, gap_load=0.02, server_queue=0.0)
    assert not slower_decode.queueing.interference and not slower_decode.disaggregation
    assert disaggregation_text(slower_decode.to_dict()) is None


def test_interference_without_server_metrics_uses_the_prefill_bound() -> None:
    within_prefill = situation(s_per_token=1e-3, ttft_c1=0.55, ttft_load=1.6)
    assert within_prefill.queueing.interference
    beyond = situation(s_per_token=1e-4, ttft_c1=0.1, ttft_load=2.0)  # 1.9 s extra vs 3 x 0.05 s of prefill
    assert not beyond.queueing.interference


def test_failed_requests_are_warned_and_left_out() -> None:
    phases = {
        PHASE_PREFILL: [*sweep(5e-4, 0.02), rec(99, 0.0, error=True)],
        PHASE_BASELINE: workload(0.1, 20, 0.01),
    }
    d = dg.analyze(Inputs(phases=phases))
    failed = [w for w in d.warnings if w.kind == WarningKind.PHASE_REQUESTS_FAILED]
    assert [(w.fields["phase"], w.fields["failed"], w.fields["sent"]) for w in failed] == [("prefill", 1, 16)]
    assert "1 of 16 requests failed in phase prefill" in warning_text(failed[0])
    assert d.prefill.fit is not None and d.prefill.fit.n == 15


def test_to_dict_is_json_ready_and_has_the_issue_keys() -> None:
    import json

    doc = situation(cold_first=2.0, ttft_load=1.0, server_queue=0.9).to_dict()
    text = json.dumps(doc, allow_nan=False, default=str)
    back = json.loads(text)
    assert back["prefill"]["s_per_token"] > 0 and back["prefill"]["tokens_per_s"] > 0
    assert back["cold_start"]["cold_start_s"] == pytest.approx(1.95)
    assert 0 < back["decode"]["decode_share"] < 1 and back["queueing"]["wait_s"] > 0
    assert [f["rank"] for f in back["findings"]] == list(range(1, len(back["findings"]) + 1))


def test_nothing_measured_is_not_a_crash() -> None:
    d = dg.analyze(Inputs(phases={}))
    assert d.findings == () and d.decode is None and d.prefill.fit is None and not d.queueing.measured


def test_no_interference_when_the_extra_ttft_is_beyond_any_prefill_work() -> None:
    # the real-engine case: no server queue time, decode steady, but 1.9 s of extra TTFT against 3 x 5 ms of prefill
    d = situation(s_per_token=1e-5, ttft_c1=0.06, ttft_load=2.0, server_queue=0.0)
    assert not d.queueing.interference and not d.disaggregation
    assert d.findings[0].cause == "queueing" and d.findings[0].fields["within_prefill"] is False
    assert "more than the prefill work" in finding_words(d.findings[0].to_dict()).evidence


def test_a_counter_reset_during_a_phase_makes_the_servers_numbers_unknown_not_negative():
    from speculab.commands.diagnose.server_metrics import server_phase
    from speculab.harness.servers.scrape import parse_metrics

    def snap(n, s, prompt):
        return parse_metrics(
            f"vllm:time_to_first_token_seconds_sum {s}\nvllm:time_to_first_token_seconds_count {n}\n"
            f"vllm:prompt_tokens_total {prompt}\n"
        )

    phase = server_phase(snap(10, 5.0, 1000), snap(12, 1.0, 40))  # sum and prompt tokens went down: a restart
    assert phase is None or (phase.ttft_mean_s is None and phase.prompt_tokens is None)
    phase = server_phase(snap(10, 5.0, 1000), snap(12, 6.0, 1100))
    assert phase.ttft_mean_s == 0.5 and phase.prompt_tokens == 100
