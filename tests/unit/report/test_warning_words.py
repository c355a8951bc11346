"""The words every bench, client-health, worker, request-option and fitting warning printed when they were sentences
made below the report (fixtures/bench_warning_words.json, saved from the code before #48 item 3) are the words the
records give now, made by `report.phrases.warning_text` from each producer's record."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from speculab.commands.bench import summary as bench_summary
from speculab.harness.analysis.rejections import OptionRejections
from speculab.harness.load import coordinator
from speculab.harness.load.client_health import ClientHealth
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.stats import Distribution
from speculab.harness.workload.fit import Fit, fit_warning
from speculab.report.phrases import warning_text

SAID_BEFORE = json.loads((Path(__file__).parent / "fixtures" / "bench_warning_words.json").read_text(encoding="utf-8"))


def _dist(p99: float) -> Distribution:
    return Distribution(
        **{k: (p99 if k == "p99" else (1 if k == "n" else 0.0)) for k in Distribution.__dataclass_fields__}
    )


def _metrics(**kw: object) -> SimpleNamespace:
    """What build_warnings reads of RunMetrics, with nothing to warn of unless `kw` says so."""
    base = dict(
        scheduled_rate_rps=10.0,
        achieved_rate_rps=10.0,
        sent=50,
        distributions={"queue_s": _dist(0.001)},
        token_count_sources={},
        output_tokens_unknown=0,
        errors_by_category={},
        ok=50,
        error=0,
    )
    return SimpleNamespace(**(base | kw))


NO_RATE = dict(requested_rate_rps=None, interrupted=False)
BENCH = {
    "interrupted": (_metrics(), dict(requested_rate_rps=None, interrupted=True)),
    "not_achieved": (
        _metrics(achieved_rate_rps=7.123, scheduled_rate_rps=9.87),
        dict(requested_rate_rps=10.0, interrupted=False),
    ),
    "schedule_off": (
        _metrics(scheduled_rate_rps=11.234, achieved_rate_rps=11.2),
        dict(requested_rate_rps=10.0, interrupted=False),
    ),
    "queue": (_metrics(distributions={"queue_s": _dist(0.0234)}), NO_RATE),
    "one_per_chunk": (_metrics(token_count_sources={"one_per_chunk": 7}), NO_RATE),
    "out_unknown": (_metrics(output_tokens_unknown=3), NO_RATE),
    "connect": (_metrics(errors_by_category={"connect": 4, "http": 2}, ok=44, error=6), NO_RATE),
    "failed_all": (_metrics(errors_by_category={"connect": 50}, ok=0, error=50), NO_RATE),
}


def _client(cpu_share: float, lag_p99_s: float) -> ClientHealth:
    return ClientHealth(10.0, cpu_share * 10.0, _dist(lag_p99_s), 0.01)


CLIENT = {
    "lag_only": lambda: _client(0.3, 0.0156).warnings(in_flight=64.0),
    "lag_only_noflight": lambda: _client(0.3, 0.0156).warnings(),
    "cpu": lambda: _client(0.91, 0.001).warnings(),
    "all": lambda: _client(0.97, 0.0312).warnings(dispatch_lag_p99_s=0.0123, in_flight=1500.0),
    "dispatch": lambda: _client(0.2, 0.001).warnings(dispatch_lag_p99_s=0.0123),
    "lag_nan_cpu": lambda: ClientHealth(0.0, 0.0, _dist(0.02), 0.01).warnings(),
    "none": lambda: _client(0.2, 0.001).warnings(),
}

WORKERS = [
    {"worker": 0, "start_lag_s": 0.0004},
    {"worker": 1, "start_lag_s": 0.0021, "start_uncertainty_s": 0.0},
    {"worker": 2, "crashed": True, "exitcode": -9, "start_lag_s": None},
    {
        "worker": 3,
        "crashed": True,
        "error": "x" * 150,
        "ray": True,
        "host": "b",
        "node_ip": "10.0.0.2",
        "start_lag_s": 0.0005,
        "start_uncertainty_s": 0.0007,
        "clock": {"uncertainty_s": 0.0007},
    },
    {"worker": 4, "crashed": True, "error": "boom", "ray": True, "host": "c", "node_ip": "10.0.0.3"},
]
WORKER_CASES = {
    "warnings": lambda: coordinator.worker_warnings(WORKERS),
    "notes": lambda: coordinator.worker_notes(WORKERS),
    "notes_local": lambda: coordinator.worker_notes([{"worker": 0, "start_lag_s": 0.0001}, {"worker": 1}]),
    "notes_ray1": lambda: coordinator.worker_notes(
        [{"worker": 0, "ray": True, "node_ip": "a"}, {"worker": 1, "ray": True, "node_ip": "a"}]
    ),
    "notes_empty": lambda: coordinator.worker_notes([]),
}

REJECTED = [
    dict(continuous_usage=True, logprobs=True, invalid=3),
    dict(stream_options=True),
    dict(invalid=5, missing=2),
    dict(missing=1),
]

FITS = {
    "left7": Fit((), 4096, "skip", 256, pool=40, left_out=tuple(f"p{i}" for i in range(7))),
    "left2_capped": Fit((), 2048, "cap", None, pool=10, left_out=("a", "b"), capped=3),
    "capped": Fit((), 2048, "cap", 128, pool=10, capped=1),
}


def _words(ws: list[ReportWarning]) -> list[str]:
    # through summary.json's shape and back, as the console reads a bench summary
    return [warning_text(ReportWarning.from_dict(json.loads(json.dumps(w.to_dict())))) for w in ws]


@pytest.mark.parametrize("case", sorted(BENCH))
def test_bench_warnings_say_what_they_said(case: str) -> None:
    m, kw = BENCH[case]
    assert _words(bench_summary.build_warnings(m, **kw)) == SAID_BEFORE[f"bench.{case}"]


@pytest.mark.parametrize("case", sorted(CLIENT))
def test_client_health_says_what_it_said(case: str) -> None:
    assert _words(CLIENT[case]()) == SAID_BEFORE[f"client.{case}"]


@pytest.mark.parametrize("case", sorted(WORKER_CASES))
def test_worker_warnings_say_what_they_said(case: str) -> None:
    assert _words(WORKER_CASES[case]()) == SAID_BEFORE[f"workers.{case}"]


@pytest.mark.parametrize("flags", REJECTED, ids=lambda f: ",".join(f))
def test_rejected_options_say_what_they_said(flags: dict[str, object]) -> None:
    r = OptionRejections()
    for k, v in flags.items():
        setattr(r, k, v)
    assert _words(r.warnings()) == SAID_BEFORE["hints." + ",".join(flags)]


@pytest.mark.parametrize("case", sorted(FITS))
def test_fitting_says_what_it_said(case: str) -> None:
    w = fit_warning(FITS[case])
    assert w is not None and _words([w]) == [SAID_BEFORE[f"fit.{case}"]]


def test_the_lost_workers_error_keeps_its_words() -> None:
    assert coordinator.lost_workers(WORKERS) == SAID_BEFORE["workers.lost"]


def test_the_records_hold_numbers_not_sentences() -> None:
    m, kw = BENCH["not_achieved"]
    (w,) = bench_summary.build_warnings(m, **kw)
    assert w.to_dict() == {
        "kind": "offered_load_not_achieved",
        "subject": "",
        "load": "",
        "fields": {"achieved_rps": 7.123, "scheduled_rps": 9.87, "requested_rps": 10.0},
    }
    assert WarningKind.CLIENT_FELL_BEHIND in {w.kind for w in CLIENT["all"]()}
