"""`speculab demo` end to end on tiny checkpoints (the shipped demo pair is tested the same way once it exists):
three arms launched through the lifecycle, both candidates verified as single changes, report written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from speculab.commands.run.demo import DemoConfig, demo_plan
from speculab.errors import UserError
from speculab.harness.results.ab_dir import load_inputs

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_demo_plan_four_arms_single_changes() -> None:
    plan = demo_plan(DemoConfig(model="/m", draft="/d", port=8123))
    assert [a.info.name for a in plan.arms] == ["baseline", "ngram-k4", "draft_model-k4", "eagle-k4"]
    assert [a.info.label for a in plan.arms] == ["plain", "ngram k=4", "draft k=4", "eagle k=4"]
    assert all(c.verified is True for c in plan.changes)
    base = plan.arms[0].launch.command
    assert base[:5] == (sys.executable, "-m", "speculab", "serve", "/m") and "8123" in base
    draft_cmd = plan.arms[2].launch.command
    assert draft_cmd[: len(base)] == base and '"model":"/d"' in draft_cmd[-1]
    assert [lv.key for lv in plan.setup.levels] == ["c1", "c4"]
    assert all(it.max_tokens <= 64 for it in plan.setup.items) and len(plan.setup.items) == 24
    kinds = {it.category for it in plan.setup.items}
    assert len(kinds) > 2  # grounded and open-ended categories interleaved
    assert (
        '"method":"eagle"' in plan.arms[3].launch.command[-1]
        and '"model":"demo-eagle"' in plan.arms[3].launch.command[-1]
    )
    assert [a.info.name for a in demo_plan(DemoConfig(draft=None, eagle=None)).arms] == ["baseline", "ngram-k4"]


@pytest.mark.slow
def test_demo_runs_on_tiny_checkpoints(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from tests.fakes.spec_models import make_tiny_eagle
    from tests.fakes.tiny_checkpoint import make_tiny_checkpoint

    # 2048 positions: the built-in prompts are long in the tiny tokenizer's tokens
    target = make_tiny_checkpoint(tmp_path / "target", max_position_embeddings=2048)
    draft = make_tiny_checkpoint(tmp_path / "draft", seed=1, layers=1, max_position_embeddings=2048)
    eagle = make_tiny_eagle(target, tmp_path / "eagle", seed=0)  # the target's own layers: drafts get accepted
    out = tmp_path / "demo"
    args = ["demo", "--quick", "--model", str(target), "--draft", str(draft), "--eagle", str(eagle)]
    args += ["--output", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "speculab", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC, "COLUMNS": "160"},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "report.html").is_file() and (out / "summary.json").is_file()
    assert str(out) in proc.stdout + proc.stderr
    inputs = load_inputs(out)
    assert [a.name for a in inputs.arms] == ["baseline", "ngram-k4", "draft_model-k4", "eagle-k4"]
    for level in ("c1", "c4"):
        (base,) = inputs.runs_for("baseline", level)
        ref = {r.index: r.output_text for r in base.records if not r.warmup}
        assert len(ref) == 8
        for cand in ("ngram-k4", "draft_model-k4", "eagle-k4"):
            (run,) = inputs.runs_for(cand, level)
            assert run.acceptance is not None and run.acceptance.source.startswith("speculab:spec_decode_* counters")
            assert all(r.ok for r in run.records)
            # greedy + exact verification: identical text in every arm
            assert {r.index: r.output_text for r in run.records if not r.warmup} == ref
        for cand in ("draft_model-k4", "eagle-k4"):
            (run,) = inputs.runs_for(cand, level)
            assert run.acceptance.active and run.acceptance.drafts > 0


def test_demo_plan_on_llamacpp_derives_and_verifies_the_candidates(tmp_path: Path, monkeypatch) -> None:
    # what scripts/install_llama_server.sh leaves behind (empty files: the plan only needs the paths)
    (tmp_path / "bin").mkdir()
    (tmp_path / "demo").mkdir()
    server = tmp_path / "bin" / "llama-server"
    server.write_text("#!/bin/sh\n")
    server.chmod(0o755)
    for name in ("target", "draft"):
        (tmp_path / "demo" / f"{name}.gguf").write_bytes(b"GGUF")
    monkeypatch.setenv("SPECULAB_LLAMACPP_DIR", str(tmp_path))
    plan = demo_plan(DemoConfig(engine="llamacpp", port=8124))
    assert [a.info.name for a in plan.arms] == ["baseline", "ngram-k4", "draft_model-k4"]
    assert all(c.verified is True for c in plan.changes) and all(a.info.engine == "llamacpp" for a in plan.arms)
    base = plan.arms[0].launch.command
    assert base[0] == str(server) and "--metrics" in base and base[base.index("-m") + 1].endswith("target.gguf")
    assert plan.arms[2].launch.command[len(base) :] == (
        "--spec-type", "draft-simple", "--spec-draft-model", str(tmp_path / "demo" / "draft.gguf"),
        "--spec-draft-n-max", "4",
    )  # fmt: skip
    monkeypatch.setenv("SPECULAB_LLAMACPP_DIR", str(tmp_path / "absent"))
    with pytest.raises(UserError, match=r"install_llama_server\.sh"):
        demo_plan(DemoConfig(engine="llamacpp"))
