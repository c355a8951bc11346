"""A misspelt flag, flag value or command is one line naming the close match (experiment-file keys: config tests)."""

from __future__ import annotations

import pytest

from fakes.cli_runner import one_line_error, run_main
from speculab.errors import did_you_mean


def test_did_you_mean_names_the_closest_choice_or_nothing() -> None:
    assert did_you_mean("chta", ("completions", "chat")) == "; did you mean `chat`?"
    assert did_you_mean("zzz", ("completions", "chat")) == ""


@pytest.mark.parametrize(
    ("argv", "fix"),
    [
        (["bench", "--url", "http://127.0.0.1:9", "-o", "X", "--num-promts", "3"], "--num-prompts"),
        (["bench", "--url", "http://127.0.0.1:9", "-o", "X", "--api", "chta"], "did you mean `chat`?"),
        (["bench", "--url", "http://127.0.0.1:9", "-o", "X", "--fit", "skp"], "did you mean `skip`?"),
        (["bench", "--url", "http://127.0.0.1:9", "-o", "X", "--rate", "1", "--arrival", "poison"], "`poisson`"),
        (["run", "e.yaml", "--max-model-length", "512"], "--max-model-len"),
        (["bnch"], "bench"),
    ],
)
def test_a_typo_names_its_fix(capsys, tmp_path, argv: list[str], fix: str) -> None:
    argv = [str(tmp_path / "out") if a == "X" else a for a in argv]
    rc, _, err = run_main(capsys, *argv)
    assert rc == 2 and fix in one_line_error(err)
