"""`--help` names each switch without a type: `--quick`, not `--quick <bool>` (issue 24: it read as taking a value)."""

from __future__ import annotations

from fakes.cli_runner import run_main


def test_switches_show_no_type_and_options_keep_theirs(capsys):
    code, out, _ = run_main(capsys, "demo", "--help")
    assert code == 0
    assert "<bool>" not in out and "--quick" in out
    assert "--model" in out and "<str>" in out  # an option that takes a value still says what kind
    code, out, _ = run_main(capsys, "bench", "--help")
    assert code == 0 and "<bool>" not in out and "--no-stream" in out
