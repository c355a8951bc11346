"""Compare's two arms (issue 37): named by the shortest distinguishing part of their paths or as the user names
them, and refused where the two results name different target models."""

from __future__ import annotations

import json
import shutil
from pathlib import Path, PurePosixPath

import pytest

from speculab.commands.compare.arms import distinguishing, output_dir, parse_names, same_model
from speculab.commands.compare.pairing import inputs_from_results
from speculab.errors import UserError
from speculab.harness.imports import aiperf_profile, guidellm_benchmarks, llmperf_responses, vllm_bench
from speculab.report.phrases import warning_text

FIXTURES = Path(__file__).parents[3] / "fixtures" / "imports"
LP = FIXTURES / "llmperf"
LP_FILE = "speculab-mock_60_16_individual_responses.json"


@pytest.mark.parametrize(
    ("a", "b", "names"),
    [
        # LLMPerf names its folders by load and its files by its arguments: two runs differ in a folder above
        ("/r/vllm/c1/x_individual_responses.json", "/r/spec/c1/x_individual_responses.json", ("vllm", "spec")),
        ("/r/baseline.json", "/r/candidate.json", ("baseline.json", "candidate.json")),
        ("/r/x.json", "/r/sub/x.json", ("r", "r/sub")),  # one inside the other: each keeps a name
        ("/a/c1/p/x.jsonl", "/b/c1/q/x.jsonl", ("a/c1/p", "b/c1/q")),
        ("/r/x.json", "/r/x.json", ("x.json (A)", "x.json (B)")),  # A vs A: still two names
    ],
)
def test_arm_names_are_the_shortest_distinguishing_parts(a: str, b: str, names: tuple[str, str]) -> None:
    got = distinguishing(PurePosixPath(a), PurePosixPath(b))
    assert got == names and got[0] != got[1]


def test_names_given_and_the_output_directory_named_after_them() -> None:
    assert parse_names(" vllm , vllm-eagle ") == ("vllm", "vllm-eagle")
    for bad in ("one", "a,a", "a,", "a,b,c"):
        with pytest.raises(UserError, match=r"^--names .*: give two different names separated by a comma"):
            parse_names(bad)
    assert output_dir(("vllm/c1", "spec/c1")) == Path("compare-vllm-c1-vs-spec-c1")
    assert output_dir(("baseline.json", "v0.5.1")) == Path("compare-baseline-vs-v0.5.1")


def test_two_llmperf_folders_of_one_load_get_two_names(tmp_path: Path) -> None:
    """Issue 37: arms named by their parent folder collided (`c1 vs c1`)."""
    for side in ("vllm", "spec"):
        shutil.copytree(LP / ("baseline" if side == "vllm" else "candidate"), tmp_path / side / "c1")
    inputs = inputs_from_results(tmp_path / "vllm" / "c1" / LP_FILE, tmp_path / "spec" / "c1" / LP_FILE)
    assert inputs.setup.name == "vllm vs spec"
    assert [a.label for a in inputs.arms] == ["A: vllm", "B: spec"]
    named = inputs_from_results(LP / "baseline" / LP_FILE, LP / "candidate" / LP_FILE, names=("plain", "eagle"))
    assert named.setup.name == "plain vs eagle" and [a.label for a in named.arms] == ["A: plain", "B: eagle"]


def test_the_model_each_reader_reads_from_its_file() -> None:
    assert vllm_bench.read(FIXTURES / "vllm" / "baseline.json").model == "speculab-mock"
    assert llmperf_responses.read(LP / "baseline" / LP_FILE).model == "speculab-mock"
    assert aiperf_profile.read(FIXTURES / "aiperf" / "baseline" / "profile_export.jsonl").model == "speculab-mock"
    assert guidellm_benchmarks.read(FIXTURES / "guidellm" / "baseline.json").model == "speculab-mock"


def test_same_model_refuses_two_models_in_one_line_naming_both() -> None:
    a, b = Path("a.json"), Path("b.json")
    assert same_model(a, b, ["Qwen/Qwen3-4B"], ["/models/qwen3-4b/"], allow=False) == ""  # a name and a path of one
    assert same_model(a, b, [""], [""], allow=False) == ""
    assert "could not be checked: a.json names Qwen3-4B, b.json none" in same_model(a, b, ["Qwen3-4B"], [""], False)
    with pytest.raises(UserError) as e:
        same_model(a, b, ["Qwen/Qwen3-4B"], ["openai/gpt-oss-20b"], allow=False)
    assert "\n" not in str(e.value)
    assert "Qwen/Qwen3-4B" in str(e.value) and "openai/gpt-oss-20b" in str(e.value)
    assert str(e.value).endswith("(or --allow-different-models to compare them anyway)")
    note = same_model(a, b, ["Qwen/Qwen3-4B"], ["openai/gpt-oss-20b"], allow=True)
    assert "different target models" in note and "--allow-different-models" in note


def _vllm_of_model(src: Path, to: Path, model: str) -> Path:
    d = json.loads(src.read_text())
    d["model_id"] = model
    to.write_text(json.dumps(d))
    return to


def test_compare_of_two_models_is_refused_unless_allowed(tmp_path: Path) -> None:
    a = _vllm_of_model(FIXTURES / "vllm" / "baseline.json", tmp_path / "qwen.json", "Qwen/Qwen3-4B")
    b = _vllm_of_model(FIXTURES / "vllm" / "candidate.json", tmp_path / "gpt.json", "openai/gpt-oss-20b")
    with pytest.raises(UserError, match=r"is of model Qwen/Qwen3-4B, .*gpt\.json of openai/gpt-oss-20b: a spec"):
        inputs_from_results(a, b)
    inputs = inputs_from_results(a, b, allow_different_models=True)
    assert any(n.startswith("different target models") for n in map(warning_text, inputs.notes))
