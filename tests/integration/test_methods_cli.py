"""`speculab methods`' user mistakes: one line naming the fix, exit 2, no traceback; and a run on speculab's own
engine through this interpreter (no server)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tests.fakes.cli_runner import one_line_error, run_main

FIXTURES = Path(__file__).parents[1] / "unit" / "harness" / "servers" / "methods" / "fixtures"


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        ((), "give --url of a running server, or --engine KIND"),
        (("--engine", "nginx"), "--engine nginx: unknown engine"),
        (("--engine", "vllm", "--model", "/no/such/dir"), "--model: "),
        (("--engine", "vllm", "--head", str(FIXTURES)), "--head: "),  # a directory without config.json
        (("--engine", "vllm", "--command", "vllm 'serve"), "--command: "),
    ],
)
def test_user_mistakes_are_one_line(capsys, argv, needle):
    rc, _, err = run_main(capsys, "methods", *argv)
    assert rc == 2 and needle in one_line_error(err)


def test_speculab_engine_through_this_python(capsys, monkeypatch):
    import speculab

    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setenv("PYTHONPATH", str(Path(speculab.__file__).parents[1]))  # this tree's speculab in the child
    command = f"{sys.executable} -m speculab serve"
    model, draft = str(FIXTURES / "qwen2.5-7b"), str(FIXTURES / "qwen2.5-0.5b-draft")
    rc, out, err = run_main(capsys, "methods", "--engine", "speculab", "--command", command, "--model", model,
                            "--draft", draft)  # fmt: skip
    assert rc == 0, err
    assert "engine/speculative/config.py (METHODS)" in out
    assert "identical vocabulary" in out and "draft_model" in out


def test_the_demos_checkpoint_names_as_serve_takes_them(capsys, monkeypatch):
    """Issue 36: `speculab methods --draft demo-draft` failed although `speculab serve` and the demo take that name."""
    import speculab
    from speculab.demo_models import SHIPPED_MODELS

    if not all((SHIPPED_MODELS[n] / "config.json").is_file() for n in ("demo", "demo-draft", "demo-eagle")):
        pytest.skip("the demo models are not in this install")
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.setenv("PYTHONPATH", str(Path(speculab.__file__).parents[1]))
    command = f"{sys.executable} -m speculab serve"
    argv = ("--engine", "speculab", "--command", command, "--model", "demo", "--draft", "demo-draft")
    rc, out, err = run_main(capsys, "methods", *argv, "--head", "demo-eagle")
    assert rc == 0, err
    assert "identical vocabulary" in out  # the draft was read: the two shipped checkpoints' vocabularies compared
    assert str(SHIPPED_MODELS["demo-draft"]) in out  # the flags it adds name the shipped directory
    rc, _, err = run_main(capsys, "methods", "--engine", "speculab", "--draft", "demo-drafts")
    assert rc == 2 and "--draft: " in one_line_error(err)  # a name that is not shipped is still a missing directory
