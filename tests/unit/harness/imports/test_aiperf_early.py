"""AIPerf's early per-record layout (#37 item 5): `timestamp_ns` and `credit_phase` where later releases write
`request_start_ns` and `benchmark_phase`, a cancelled request first. No AIPerf release on the package index writes it
(0.1.1 writes no profile_export.jsonl), so the file is made here from a real AIPerf 0.13.0 file
(tests/fixtures/imports/aiperf/baseline) by renaming those two keys as users' 0.1.x files name them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fakes.words import words
from speculab.harness.imports import aiperf_profile
from speculab.harness.imports.registry import result_format
from speculab.harness.records import ErrorCategory

REAL = Path(__file__).resolve().parents[3] / "fixtures" / "imports" / "aiperf" / "baseline"


def _early(tmp_path: Path, cancelled_first: bool = True) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(REAL / "profile_export_aiperf.json", run)
    rows = [json.loads(line) for line in (REAL / "profile_export.jsonl").read_text().splitlines() if line.strip()]
    for r in rows:
        m = r["metadata"]
        m["timestamp_ns"] = m.pop("request_start_ns")
        m["credit_phase"] = m.pop("benchmark_phase")
    if cancelled_first:
        cut = {"metadata": dict(rows[0]["metadata"], was_cancelled=True, x_request_id="cut"), "metrics": {}}
        cut["metadata"]["timestamp_ns"] -= 1  # sent first
        rows.insert(0, cut)
    out = run / "profile_export.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def test_the_early_layout_reads_as_the_later_one(tmp_path: Path) -> None:
    f = _early(tmp_path, cancelled_first=False)
    assert result_format(f) == "aiperf"
    early, later = aiperf_profile.read(f), aiperf_profile.read(REAL / "profile_export.jsonl")
    assert [r.sent_s for r in early.records] == [r.sent_s for r in later.records]
    assert [r.end_s for r in early.records] == [r.end_s for r in later.records]
    assert any("early layout" in n for n in words(early.notes))
    assert not any("early layout" in n for n in words(later.notes))


def test_a_cancelled_first_record_is_a_cancelled_request_not_a_refusal(tmp_path: Path) -> None:
    run = aiperf_profile.read(_early(tmp_path))
    first = run.records[0]
    assert first.error is not None and first.error.category is ErrorCategory.CANCELLED
    assert all(r.error is None for r in run.records[1:])
