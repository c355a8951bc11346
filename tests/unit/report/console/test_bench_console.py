import io
import json
from pathlib import Path

from rich.console import Console

from speculab.commands.bench.summary import build_summary
from speculab.harness.analysis.metrics import StallConfig, aggregate
from speculab.harness.records import ChunkEvent, ErrorCategory, ErrorInfo, RequestRecord
from speculab.harness.results.strict_json import json_safe
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.report.console.bench import print_bench_summary


def test_bench_summary_renders_numbers_and_escapes_server_text():
    ok = RequestRecord(
        0, 0.0, 0.0, 0.2, chunks=(ChunkEvent(0.1, "a", 2), ChunkEvent(0.12, "b", 2)), completion_tokens=4
    )
    bad = RequestRecord(1, 0.0, 0.0, 0.1, error=ErrorInfo(ErrorCategory.HTTP, "HTTP 500: [bold]boom[/]", 500))
    s = build_summary(
        aggregate([ok, bad]),
        run={"model": "[red]m[/red]", "api": "completions", "workload": "w"},
        load={"rate_rps": None},
        stall=StallConfig(),
        warmup_requests=1,
        spec_decode={"acceptance_rate": 0.5, "acceptance_length": 2.5, "per_position": [0.7, 0.3], "source": "x"},
        spec_decode_note=None,
        metrics_scraped=True,
        interrupted=False,
    )
    console = Console(record=True, width=140)
    print_bench_summary(console, json_safe(s))
    out = console.export_text()
    assert "TTFT" in out and "100.0" in out  # 0.1 s shown as milliseconds
    assert "[red]m[/red]" in out  # server-provided text shown literally, not interpreted as markup
    assert "mean acceptance length 2.500" in out and "per position 0.70 0.30" in out
    assert "error 1" in out and "http 1" in out
    assert "e.g. http: HTTP 500: [bold]boom[/]" in out


def test_bench_summary_says_why_acceptance_is_missing_and_shows_the_drawn_schedule():
    ok = RequestRecord(0, 0.0, 0.0, 0.2, chunks=(ChunkEvent(0.1, "a", 1),), completion_tokens=1)
    later = RequestRecord(1, 0.5, 0.5, 0.7, chunks=(ChunkEvent(0.6, "a", 1),), completion_tokens=1)
    s = build_summary(
        aggregate([ok, later]),
        run={"model": "m", "api": "completions", "workload": "w"},
        load={"rate_rps": 2.5},
        stall=StallConfig(),
        warmup_requests=0,
        spec_decode=None,
        spec_decode_note=ReportWarning(WarningKind.COUNTERS_DID_NOT_MOVE, fields={"engine": "vllm"}),  # a record
        metrics_scraped=True,
        interrupted=False,
    )
    console = Console(record=True, width=200)
    print_bench_summary(console, json_safe(s))
    out = console.export_text()
    assert "offered 2.50 req/s (schedule 2.00), achieved 2.00" in out
    said = "speculation –  (vllm:spec_decode counters did not move: no speculative steps during the window)"
    assert said in out  # formatting.MISSING, then the report's words for the record
    # a summary.json /2 written while the note was a sentence says the same
    s["server"]["spec_decode_note"] = "vllm:spec_decode counters did not move: no speculative steps during the window"
    console = Console(record=True, width=200)
    print_bench_summary(console, json_safe(s))
    assert said in console.export_text()


def test_cancelled_requests_are_said_apart_never_as_sent_or_failed():
    """Issue 36: after Ctrl-C bench printed `sent 10 ok 9 error 1 (cancelled 1)` and "1 of 10 requests failed"."""
    ok = RequestRecord(0, 0.0, 0.0, 0.2, chunks=(ChunkEvent(0.1, "a", 1),), completion_tokens=1)
    cancelled = ErrorInfo(ErrorCategory.CANCELLED, "cancelled: the run was interrupted")
    cut = RequestRecord(1, 0.0, 0.0, 0.3, error=cancelled)
    s = build_summary(
        aggregate([ok] * 9 + [cut]),
        run={"model": "m", "api": "completions", "workload": "w"},
        load={"rate_rps": None},
        stall=StallConfig(),
        warmup_requests=0,
        spec_decode=None,
        spec_decode_note=None,
        metrics_scraped=False,
        interrupted=True,
    )
    assert s["counts"]["sent"] == 9 and s["counts"]["error"] == 0 and s["counts"]["cancelled"] == 1
    console = Console(record=True, width=140)
    print_bench_summary(console, json_safe(s))
    out = console.export_text()
    assert "sent 9  ok 9  error 0  (warmup 0, cancelled 1)" in out
    assert "requests failed" not in out and "cancelled: the run" not in out


FIXTURES = Path(__file__).parents[1] / "fixtures"


def _console_text(summary: dict) -> str:
    console = Console(record=True, width=120, file=io.StringIO())
    print_bench_summary(console, summary)
    return console.export_text()


def test_a_v1_summary_prints_its_warning_sentences_as_it_did():
    """A summary.json from before warnings were records (/1: sentences) prints byte for byte what speculab printed
    for it then (fixtures/bench_summary_v1.console.txt, rendered by the code before #48 item 3): each sentence is
    read as a note."""
    summary = json.loads((FIXTURES / "bench_summary_v1.json").read_text(encoding="utf-8"))
    assert summary["schema"] == "speculab.bench.summary/1" and all(isinstance(w, str) for w in summary["warnings"])
    assert _console_text(summary) == (FIXTURES / "bench_summary_v1.console.txt").read_text(encoding="utf-8")


def test_warning_records_are_worded_and_untrusted_text_is_escaped():
    s = build_summary(
        aggregate([]),
        run={},
        load={"rate_rps": None},
        stall=StallConfig(),
        warmup_requests=0,
        spec_decode=None,
        spec_decode_note=None,
        metrics_scraped=False,
        interrupted=True,
        hints=[ReportWarning(WarningKind.SERVER_GONE, fields={"evidence": "[bold]connection refused[/]"})],
    )
    out = _console_text(json_safe(s))
    assert "warning: run interrupted: the summary covers only the requests that ran" in out
    assert "the run stopped there: [bold]connection refused[/]" in out  # the server's words shown literally
    old = json_safe(s) | {"schema": "speculab.bench.summary/1", "warnings": ["a [red]sentence[/red] of /1"]}
    assert "warning: a [red]sentence[/red] of /1" in _console_text(old)
