"""A bench run directory: records streamed and read back, a refused directory, a full disk, the redacted argv."""

import math
import re

import pytest

from fakes.full_disk import injected_full_disk, small_disk
from speculab.errors import UserError
from speculab.harness.records import ChunkEvent, RequestRecord
from speculab.harness.results.requests_file import RequestsFile, iter_records, read_records, write_records
from speculab.harness.results.run_dir import RunDir
from speculab.harness.results.strict_json import json_safe


def test_json_safe():
    assert json_safe({"a": math.nan, "b": [1.0, math.inf], "c": (2,)}) == {"a": None, "b": [1.0, None], "c": [2]}


def test_run_dir_streams_records_and_survives_a_torn_line(tmp_path):
    rd = RunDir(tmp_path / "run").create()
    r = RequestRecord(0, 0.0, 0.1, 0.5, chunks=(ChunkEvent(0.2, "hé", 1),), completion_tokens=1)
    rd.append(r)
    # flushed at once: readable before close
    assert read_records(tmp_path / "run" / "requests.jsonl") == [r]
    with (tmp_path / "run" / "requests.jsonl").open("a") as f:
        f.write('{"index": 1, "sched')  # the process died mid-write
    assert read_records(tmp_path / "run" / "requests.jsonl") == [r]
    rd.close()
    with pytest.raises(UserError, match="already holds a run"):
        RunDir(tmp_path / "run").create()
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="is a file"):
        RunDir.check(tmp_path / "file")
    # a directory below a file: os.access says the parent is writable, mkdir still fails -> one line, no traceback
    with pytest.raises(UserError, match="cannot create it"):
        RunDir(tmp_path / "file" / "run").create()


def test_model_output_with_unicode_line_separators_reads_back(tmp_path):
    # JSON leaves U+2028, U+2029 and U+0085 unescaped (non-ASCII is kept); str.splitlines() took them for line ends
    # and refused the whole run as "not a request record"
    text = "a\u2028b\u2029c\x85d\x1ce"
    recs = [
        RequestRecord(0, 0.0, 0.1, 0.5, chunks=(ChunkEvent(0.2, text, 1),), output_text=text),
        RequestRecord(1, 0, 0, 1),
    ]
    write_records(tmp_path / "requests.jsonl", recs)
    assert read_records(tmp_path / "requests.jsonl") == recs
    assert list(iter_records(tmp_path / "requests.jsonl")) == recs


def test_a_bad_line_before_the_last_is_refused_with_its_line_number(tmp_path):
    path = tmp_path / "requests.jsonl"
    write_records(path, [RequestRecord(0, 0.0, 0.1, 0.5)])
    with path.open("a") as f:
        f.write('{"index": 1, "sched\n\n')  # torn, then a (blank) line after it: not the last line
    with pytest.raises(UserError, match=r"requests.jsonl:2: not a request record"):
        read_records(path)


def _fill(rd: RunDir) -> int:
    """Append records until the disk refuses one; how many went in."""
    text = "x" * 2000  # a few KB a record: a 256 KB disk is full after ~100
    for i in range(10_000):
        try:
            rd.append(RequestRecord(i, 0.0, 0.1, 0.5, chunks=(ChunkEvent(0.2, text, 1),), completion_tokens=1))
        except UserError as e:
            assert re.fullmatch(
                r"cannot write .*requests\.jsonl \(No space left on device\); the run stopped\..*", str(e)
            )
            return i
    raise AssertionError("the disk never filled")


@pytest.mark.parametrize("disk", [small_disk, injected_full_disk])
def test_a_full_disk_is_one_line_and_the_file_ends_on_a_whole_record(tmp_path, monkeypatch, disk):
    with disk(tmp_path / "small", monkeypatch) as small:
        rd = RunDir(small / "run").create()
        n = _fill(rd)
        with pytest.raises(UserError, match="No space left"):  # no more records after the first refused one
            rd.append(RequestRecord(n + 1, 0.0, 0.1, 0.2))
        rd.close()
        raw = (small / "run" / "requests.jsonl").read_bytes()
        assert n > 0 and raw.endswith(b"\n") and raw.count(b"\n") == n  # the partial record was cut back
        assert [r.index for r in read_records(small / "run" / "requests.jsonl")] == list(range(n))


def test_a_torn_last_line_is_cut_back_before_more_records_are_appended(tmp_path):
    path = tmp_path / "run" / "requests.jsonl"
    r = RequestRecord(0, 0.0, 0.1, 0.5)
    write_records(path, [r])
    with path.open("a") as f:
        f.write('{"index": 1, "sched')  # a kill mid-write, by a release that did not cut it back
    again = RequestsFile(path)  # `speculab run --resume` appends to the block's file
    again.append(RequestRecord(2, 0.0, 0.1, 0.5))
    again.close()
    assert [x.index for x in read_records(path)] == [0, 2]


def test_no_command_overwrites_a_result_it_did_not_create(tmp_path):
    """Issue 17: `compare A B --output A` replaced A's bench summary.json; `run --output DIR` and
    `report X --output BENCHDIR` overwrote other results silently."""
    from speculab.harness.results.ab_dir import check_ab_output_dir
    from speculab.harness.results.output_dir import check_render_target
    from speculab.harness.verdict.model import REPORT_SCHEMA

    bench = tmp_path / "bench"
    RunDir(bench).create().close()
    (bench / "summary.json").write_text('{"schema": "speculab.bench.summary/1"}')
    report_only = tmp_path / "rendered"
    report_only.mkdir()
    (report_only / "summary.json").write_text('{"schema": "speculab.report.summary/1"}')
    (report_only / "report.html").write_text("<html>")
    for check in (check_ab_output_dir, RunDir.check):
        for d in (bench, report_only):
            with pytest.raises(UserError, match=r"already holds a run \(.*summary\.json.*\); choose a new directory"):
                check(d)
    with pytest.raises(UserError, match=r"holds another result .* which the report would overwrite"):
        check_render_target(bench, REPORT_SCHEMA)
    check_render_target(report_only, REPORT_SCHEMA)  # a report rendered there before may be rendered again
    check_render_target(tmp_path / "new", REPORT_SCHEMA)
    (report_only / "inputs.json").write_text("{}")  # ... but not once it is a run directory
    with pytest.raises(UserError, match="holds another result"):
        check_render_target(report_only, REPORT_SCHEMA)


@pytest.mark.parametrize("junk", [b"\xff\xfe\x00", b"[" * 100_000, b'{"index": 1' + b"0" * 5000 + b"}"])
def test_a_damaged_line_is_refused_with_its_line_number_not_a_traceback(tmp_path, junk):
    """`speculab report` on a results directory whose requests.jsonl was damaged (bad bytes, junk) was a traceback."""
    path = tmp_path / "requests.jsonl"
    write_records(path, [RequestRecord(0, 0.0, 0.1, 0.5)])
    with path.open("ab") as f:
        f.write(junk + b"\n" + b'{"index": 2}\n')
    with pytest.raises(UserError, match=r"requests.jsonl:2: not a request record"):
        read_records(path)


@pytest.mark.parametrize("junk", ["[1, 2]", "[" * 100_000, '{"a": 1}'])
@pytest.mark.parametrize("name", ["inputs.json", "run.json"])
def test_a_damaged_ab_directory_file_is_one_line(tmp_path, junk, name):
    """A list, a deep nest or a foreign object in inputs.json / run.json was an AttributeError or RecursionError."""
    from fakes.ab_inputs import make_inputs
    from speculab.harness.results.ab_dir import load_inputs, save_inputs

    save_inputs(tmp_path / "ab", make_inputs(n_prompts=4, repeats=1))
    target = next((tmp_path / "ab").rglob(name))
    target.write_text(junk)
    with pytest.raises(UserError, match=rf"{name}: unreadable \("):
        load_inputs(tmp_path / "ab")
