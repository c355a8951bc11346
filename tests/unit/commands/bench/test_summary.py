"""A bench run's summary.json: strict JSON even when empty, its warnings records with a kind (schema /2), and the
flag named for a rejected option."""

import json

from speculab.commands.bench.summary import build_summary
from speculab.harness.analysis.metrics import StallConfig, aggregate
from speculab.harness.records import RequestRecord
from speculab.harness.results.strict_json import json_safe
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.report.console.bench import bench_renderable


def test_summary_is_strict_json_even_when_empty():
    s = build_summary(
        aggregate([]),
        run={},
        load={"rate_rps": 5.0},
        stall=StallConfig(),
        warmup_requests=0,
        spec_decode=None,
        spec_decode_note=ReportWarning(WarningKind.METRICS_UNREAD, fields={"how": "disabled"}),
        metrics_scraped=False,
        interrupted=True,
    )
    text = json.dumps(json_safe(s), allow_nan=False)
    back = json.loads(text)
    assert back["counts"]["sent"] == 0 and back["metrics"]["ttft_s"]["p50"] is None
    assert back["schema"] == "speculab.bench.summary/2"
    assert back["warnings"] == [{"kind": "bench_interrupted", "subject": "", "load": "", "fields": {}}]
    # why there is no acceptance: a record too (the report words it: "metrics scraping disabled")
    unread = {"kind": "metrics_unread", "subject": "", "load": "", "fields": {"how": "disabled"}}
    assert back["server"]["spec_decode_note"] == unread
    bench_renderable(json_safe(s))  # renders without numbers


def test_hints_name_the_flag_for_rejected_options():
    from speculab.harness.analysis.rejections import request_option_warnings
    from speculab.harness.records import ErrorCategory, ErrorInfo

    def rejected(msg):
        return RequestRecord(0, 0.0, 0.0, 0.1, error=ErrorInfo(ErrorCategory.HTTP, f"HTTP 400: {msg}", 400))

    def fields(records):
        return [(w.kind.value, w.fields) for w in request_option_warnings(records)]

    assert fields([rejected("unknown field continuous_usage_stats")]) == [
        ("option_rejected", {"option": "continuous_usage_stats", "fix": "rerun with --no-continuous-usage"})
    ]
    assert fields([rejected("stream_options not supported")]) == [
        ("option_rejected", {"option": "stream_options", "fix": "rerun with --no-include-usage"})
    ]
    assert fields([]) == []
    missing = RequestRecord(0, 0.0, 0.0, 0.1, error=ErrorInfo(ErrorCategory.HTTP, "HTTP 404: Not Found", 404))
    assert fields([missing, missing]) == [("endpoint_not_served", {"count": 2})]
