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


def test_acceptance_not_the_users_is_the_first_warning_and_the_first_line():
    from rich.console import Console

    from speculab.commands.bench.summary import validity_warnings

    workload = {"spec": "synthetic:input=20,output=8", "n_items": 10, "synthesised": 10}
    spec = {"acceptance_rate": 0.5, "acceptance_length": 2.0, "per_position": [0.6, 0.4], "provenance": "forced",
            "forced_by": ["g = 1"]}  # fmt: skip
    found = validity_warnings(workload, True, spec, ["--forced-acceptance-rates 0.6,0.4"], [(6, "length")] * 5)
    kinds = [w.kind.value for w in found]
    assert kinds == [
        "acceptance_synthetic_prompts",
        "acceptance_ignore_eos",
        "acceptance_forced",
        "acceptance_short_outputs",
    ]
    assert found[2].fields == {"configured": ["--forced-acceptance-rates 0.6,0.4"], "reported": ["g = 1"]}
    # k from the per-position rates; 4 steps of the acceptance length measured, 2 tokens each
    assert found[3].fields["k"] == 2 and found[3].fields["needed"] == 8
    s = build_summary(
        aggregate([]),
        run={"workload": "synthetic"},
        load={},
        stall=StallConfig(),
        warmup_requests=0,
        spec_decode=spec,
        spec_decode_note=None,
        metrics_scraped=True,
        interrupted=True,
        validity=found,
    )
    assert [w["kind"] for w in s["warnings"][:4]] == kinds and s["warnings"][4]["kind"] == "bench_interrupted"
    console = Console(width=1000, record=True)
    console.print(bench_renderable(json_safe(s)))
    lines = [ln for ln in console.export_text().splitlines() if ln.strip()]
    assert lines[1].startswith("acceptance measured on synthetic prompts: not your traffic's"), lines[:3]
    assert sum("not your traffic's" in ln for ln in lines) == 3  # synthetic, ignore_eos, forced: once each
    assert any(ln.startswith("speculation (forced, not measured) acceptance rate") for ln in lines)
    # the user's prompts, without ignore_eos, measured, long enough: nothing
    mine = {"spec": "builtin:mixed", "n_items": 10, "synthesised": 0}
    assert validity_warnings(mine, False, {"per_position": [0.6, 0.4]}, [], [(64, "length")] * 5) == []
    assert validity_warnings({"spec": "synthetic:input=2,output=2", "n_items": 3}, False, None, [], []) != []  # older
