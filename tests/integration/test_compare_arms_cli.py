"""`speculab compare` as a user runs it on the tools' output (issue 37): the directories a tool wrote, arms that get
two names, and two target models refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

from fakes.cli_runner import one_line_error, run_main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
LP = FIXTURES / "llmperf"


def test_two_llmperf_results_directories_compare_under_their_own_names(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the default output directory is written here
    code, out, err = run_main(capsys, "compare", str(LP / "baseline"), str(LP / "candidate"))
    assert code == 0, err
    assert out.split("\n")[0].startswith("speculab A/B baseline vs candidate")
    assert (tmp_path / "compare-baseline-vs-candidate" / "summary.json").is_file()
    code, out, err = run_main(
        capsys, "compare", str(LP / "baseline"), str(LP / "candidate"), "--names", "plain,eagle", "--output", "ab"
    )
    assert code == 0, err
    assert out.split("\n")[0].startswith("speculab A/B plain vs eagle") and "B: eagle" in out


def test_a_directory_of_several_results_is_one_line_listing_them(capsys) -> None:
    code, _, err = run_main(capsys, "compare", str(LP), str(LP / "candidate"))
    line = one_line_error(err)
    assert code == 2 and "holds 5 results (baseline/" in line and "candidate-c4/" in line


def test_two_target_models_are_refused_unless_allowed(tmp_path: Path, capsys) -> None:
    files = []
    for name, src, model in (("qwen", "baseline", "Qwen/Qwen3-4B"), ("gpt", "candidate", "openai/gpt-oss-20b")):
        d = json.loads((FIXTURES / "vllm" / f"{src}.json").read_text())
        d["model_id"] = model
        (tmp_path / f"{name}.json").write_text(json.dumps(d))
        files.append(str(tmp_path / f"{name}.json"))
    code, _, err = run_main(capsys, "compare", *files, "--output", str(tmp_path / "ab"))
    line = one_line_error(err)
    assert code == 2 and "Qwen/Qwen3-4B" in line and "openai/gpt-oss-20b" in line and "--allow-different-models" in line
    code, out, err = run_main(capsys, "compare", *files, "--output", str(tmp_path / "ab"), "--allow-different-models")
    assert code == 0, err
    assert "different target models" in out and "correctness: no difference" not in out
