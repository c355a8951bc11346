"""Hostile files (issue 25): deep nesting, huge lines, invalid UTF-8 and NUL bytes in workloads, traces and
experiment files are one line naming the file and the line, and exit 2; never a traceback."""

from __future__ import annotations

import re

import pytest

from fakes.cli_runner import one_line_error, run_main
from speculab.harness.workload.files.jsonl import MAX_LINE_CHARS

GOOD = {
    "jsonl": b'{"prompt": "fine"}\n',
    "trace": b'{"timestamp": 0, "input_length": 5, "output_length": 3}\n',
}
DEEP = b"[" * 100_000 + b"]" * 100_000
BROKEN = {
    "deep-nesting": (DEEP, "nested too deeply"),
    "deep-object": (b'{"prompt": "x", "checks": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    "huge-line": (b'{"prompt": "' + b"x" * (MAX_LINE_CHARS + 1) + b'"}', "line over 16 MB"),
    "invalid-utf8": (b'{"prompt": "caf\xe9"}', "not UTF-8 text (byte 0xe9 at column 16)"),
    "nul": (b'{"prompt": "a\x00b"}', "a NUL byte at column 14"),
    "huge-number": (b'{"timestamp": 1' + b"0" * 5000 + b', "prompt": "x"}', "digits"),
}


@pytest.mark.parametrize("source", ["jsonl", "trace"])
@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_broken_line_of_a_workload_or_trace_is_one_line_naming_it(capsys, tmp_path, source, kind):
    """Issue 25: a JSONL line nested 100,000 deep ended `speculab workload` with a RecursionError traceback."""
    data, expect = BROKEN[kind]
    path = tmp_path / "w.jsonl"
    path.write_bytes(GOOD[source] * 2 + b"\n" + data + b"\n" + GOOD[source])  # the broken line is line 4
    spec = f"trace:{path}" if source == "trace" else str(path)
    code, _, err = run_main(capsys, "workload", spec)
    line = one_line_error(err)
    assert code == 2 and f"{path}:4:" in line and expect in line, line


def test_a_line_separator_inside_a_json_string_does_not_cut_the_line(capsys, tmp_path):
    path = tmp_path / "w.jsonl"
    path.write_text('{"prompt": "a\u2028b\u0085c"}\n', encoding="utf-8")
    code, out, err = run_main(capsys, "workload", str(path))
    assert code == 0 and "1 requests (1 distinct prompts)" in out, (out, err)  # was: "Unterminated string"


@pytest.mark.parametrize(
    ("spec", "data"),
    [
        ("jsonl:{}", b'{"prompt": "fine"}\n{"prompt": "also fine"}\n'),
        ("sharegpt:{}", b'[{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}]'),
        ("jsonl:{}", b'{"prompt": "fine"}\r\n{"prompt": "also fine"}\r\n'),
    ],
)
def test_a_file_saved_with_a_byte_order_mark_or_crlf_loads(capsys, tmp_path, spec, data):
    """Windows editors save UTF-8 with a BOM (and CRLF): it was "not valid JSON (Unexpected UTF-8 BOM)" on line 1."""
    path = tmp_path / "w.json"
    path.write_bytes(b"\xef\xbb\xbf" + data)
    code, out, err = run_main(capsys, "workload", spec.format(path))
    assert code == 0 and "requests" in out, (out, err)


@pytest.mark.parametrize(
    ("data", "expect"),
    [
        (b"[" * 100_000, ":1: nested too deeply"),
        (b'[\n{"conversations": \n' + b"[" * 100_000, ":3: nested too deeply"),
        (b'[{"conversations": [{"from": "human", "value": "\xff"}]}]', ":1: not UTF-8"),
        (b"[\n\x00]", ":2: a NUL byte"),
    ],
)
def test_a_broken_sharegpt_file_is_one_line_naming_the_line(capsys, tmp_path, data, expect):
    path = tmp_path / "s.json"
    path.write_bytes(data)
    code, _, err = run_main(capsys, "workload", f"sharegpt:{path}")
    assert code == 2 and f"{path}{expect}" in one_line_error(err)


@pytest.mark.parametrize(
    ("data", "expect"),
    [
        (b"workload: {spec: builtin:qa}\nloads: " + b"[" * 100_000, r":2:\d+: not valid YAML: nested more than 64"),
        (b"workload:\n" + b"".join(b"  " * i + b"k:\n" for i in range(1, 200)), r":\d+:\d+: .*nested more than 64"),
        (b"workload: {spec: builtin:qa}\nbaseline: {url: \xff}\n", r":2: not UTF-8 text \(byte 0xff at column 17\)"),
        (b"workload: {spec: builtin:qa}\n\n\x00", r":3: a NUL byte at column 1"),
    ],
)
def test_a_broken_experiment_file_is_one_line_naming_the_line(capsys, tmp_path, data, expect):
    path = tmp_path / "exp.yaml"
    path.write_bytes(data)
    code, _, err = run_main(capsys, "run", str(path), "--output", str(tmp_path / "out"))
    line = one_line_error(err)
    assert code == 2 and re.search(re.escape(str(path)) + expect, line), line


def test_a_trace_prompt_longer_than_any_context_is_refused_before_it_is_synthesised(capsys, tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(GOOD["trace"] + b'{"timestamp": 1, "input_length": 1000000000000}\n')
    code, _, err = run_main(capsys, "workload", f"trace:{path}")
    line = one_line_error(err)
    assert code == 2 and f"{path}:2:" in line and "up to 16777216" in line
