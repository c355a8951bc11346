"""`speculab workload`: lists the built-in sets, summarizes a spec, and turns bad input into one line and exit 2."""

from __future__ import annotations

import pytest

from speculab.cli import main


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    return e.value.code or 0, out, err


def test_lists_builtin_sets(capsys):
    code, out, _ = run_cli(["workload"], capsys)
    assert code == 0
    for name in ("builtin:code-edit", "builtin:rag-qa", "builtin:math", "builtin:mixed"):
        assert name in out


def test_summarizes_a_workload_and_shows_items(capsys):
    code, out, _ = run_cli(["workload", "builtin:mixed", "--num-prompts", "14", "--show", "2", "--api", "chat"], capsys)
    assert code == 0
    assert "mixed: 14 requests (14 distinct prompts)" in out
    assert "code-edit 2" in out and "rag-qa 2" in out
    assert "#0 code-edit-000 [code-edit] seed 821328062" in out
    assert "parse_duration" in out


def test_a_structured_set_says_how_many_requests_send_a_response_format(capsys):
    code, out, _ = run_cli(["workload", "builtin:json", "--api", "chat"], capsys)
    assert code == 0 and "builtin:json" in run_cli(["workload"], capsys)[1]
    assert "response_format on 24 requests (json_schema 24)" in out
    _, plain, _ = run_cli(["workload", "builtin:qa", "--num-prompts", "2"], capsys)
    assert "response_format" not in plain


def test_bad_workload_is_one_line_and_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"prompt": "x", "max_tokens": -1}\n')
    code, out, err = run_cli(["workload", str(bad)], capsys)
    assert code == 2 and out == ""
    assert err.strip() == f"error: {bad}:2: 'max_tokens' must be a positive integer, got -1"
    assert "Traceback" not in err


def test_a_workload_with_a_python_check_is_loaded_without_importing_it(tmp_path, capsys, monkeypatch):
    """A shared workload file names code; `speculab workload` (and every loader) must not run it (issue 17)."""
    import json
    import sys

    marker = tmp_path / "imported"
    (tmp_path / "evil_next_to_it.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\ndef f(t, i):\n    return 1\n"
    )
    wl = tmp_path / "evil.jsonl"
    wl.write_text(json.dumps({"prompt": "hi", "checks": [{"type": "python", "function": "evil_next_to_it:f"}]}) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(["workload", str(wl)], capsys)
    assert code == 0 and "checks on 1 requests (python 1)" in out
    assert not marker.exists() and "evil_next_to_it" not in sys.modules
