"""`speculab compare` reading a vLLM `bench sweep serve` experiment directory (issue 27: "a vLLM sweep directory
becomes per-load comparisons with the crossover").

The fixture is a real directory vLLM 0.32.0's sweep wrote (tests/fixtures/imports/vllm-sweep/README.md): two server
settings of `speculab mock-server` (`plain`, TPOT 30 ms; `spec`, two tokens per chunk, TPOT 20 ms: 1.5x faster), two
loads (`--max-concurrency` 1 and 4), two runs each, 24 prompts per run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from fakes.cli_runner import one_line_error, run_main
from speculab.commands.compare.pairing import inputs_from_results
from speculab.harness.imports import vllm_sweep
from speculab.harness.imports.registry import result_format
from speculab.report.phrases import warning_text

SWEEP = Path(__file__).resolve().parents[1] / "fixtures" / "imports" / "vllm-sweep" / "sweep"
PLAIN, SPEC = SWEEP / "SERVE--plain", SWEEP / "SERVE--spec"  # the prefixes of each setting's combinations
ONE_FILE = SWEEP.parents[1] / "vllm" / "baseline.json"


def _tpot(level: dict) -> dict:
    return next(m for m in level["comparisons"][0]["metrics"] if m["metric"] == "tpot_s")


def test_two_settings_of_a_sweep_are_compared_load_by_load_with_their_runs_as_repeats(tmp_path: Path, capsys) -> None:
    assert result_format(PLAIN) == result_format(SWEEP) == "vllm-sweep"
    assert result_format(SWEEP / "SERVE--spec-BENCH--c4") == "vllm-sweep"
    code, out, err = run_main(capsys, "compare", str(PLAIN), str(SPEC), "--output", str(tmp_path / "ab"))
    assert code == 0, err
    summary = json.loads((tmp_path / "ab" / "summary.json").read_text())
    assert [lv["label"] for lv in summary["levels"]] == ["concurrency 1", "concurrency 4"]
    assert summary["levels"][0]["roles"] == ["low", "sweep"] and summary["levels"][1]["roles"] == ["operating", "sweep"]
    assert summary["setup"]["repeats"] == 2
    for level in summary["levels"]:
        tp = _tpot(level)
        assert tp["decision"] == "faster" and abs(tp["speedup"] / 1.5 - 1) < 0.02 and tp["n_pairs"] == 24, tp
        assert {a["arm"]: a["repeats"] for a in level["arms"]} == {"baseline": 2, "candidate": 2}
    assert summary["candidates"][0]["crossover"] is not None  # computed across the loads
    assert "crossover: speedup estimate above 1 at every load measured" in out
    assert out.split("\n")[0].startswith("speculab A/B SERVE--plain vs SERVE--spec") and "2 repeats" in out
    assert "SERVE--spec: a vLLM bench sweep serve directory (vLLM 0.32.0; SERVE--spec-BENCH--c1 (2 runs)" in out
    # the two runs of each load are its repeats: too few for a throughput interval, which is withheld with the reason,
    # and the advice names what compare can be given (more runs per load), not an experiment file's `repeats:` (#36)
    tput = summary["levels"][1]["comparisons"][0]["throughput_ratio"]
    assert tput["n"] == 2 and tput["estimate"] is not None and tput["low"] is None and tput["high"] is None
    assert "(2 paired repeats, too few for an interval, which needs 3)" in out
    assert "compare results of 3 or more runs per load on each side" in out and "`repeats:" not in out


def test_one_combination_is_one_load(tmp_path: Path) -> None:
    inputs = inputs_from_results(SWEEP / "SERVE--plain-BENCH--c4", SWEEP / "SERVE--spec-BENCH--c4")
    assert [lv.key for lv in inputs.setup.levels] == ["c4"] and inputs.setup.repeats == 2
    assert [(r.arm, r.repeat) for r in inputs.runs] == [("baseline", 1), ("candidate", 1), ("baseline", 2),
                                                        ("candidate", 2)]  # fmt: skip


def test_unpaired_a_sweep_counts_each_prompt_once_over_its_runs(tmp_path: Path, capsys) -> None:
    code, _out, err = run_main(capsys, "compare", str(PLAIN), str(SPEC), "--unpaired", "--output", str(tmp_path / "u"))
    assert code == 0, err
    summary = json.loads((tmp_path / "u" / "summary.json").read_text())
    tp = _tpot(summary["levels"][1])
    # each side's two runs sent the same 24 prompts: a prompt's runs are one value (their median), not two requests
    assert tp["unit"] == "unpaired" and tp["samples"] == [24, 24] and tp["decision"] == "faster"
    assert any("a prompt's runs are one value (their median)" in w for w in (x["text"] for x in summary["warnings"]))


def test_a_sweep_of_two_settings_must_be_named_by_setting(tmp_path: Path, capsys) -> None:
    code, _, err = run_main(capsys, "compare", str(SWEEP), str(SPEC), "--output", str(tmp_path / "o"))
    line = one_line_error(err)
    assert code == 2 and "a vLLM sweep of 2 server settings (plain, spec)" in line and str(PLAIN) in line, line


def test_a_sweep_against_runs_at_other_loads_is_refused(tmp_path: Path, capsys) -> None:
    code, _, err = run_main(capsys, "compare", str(PLAIN), str(ONE_FILE), "--output", str(tmp_path / "o"))
    line = one_line_error(err)
    assert code == 2 and "holds runs at concurrency 1, concurrency 4" in line and "at concurrency 4:" in line, line


def test_a_setting_with_fewer_runs_is_compared_on_the_runs_both_have(tmp_path: Path) -> None:
    spec = tmp_path / "sweep"
    for combo in ("SERVE--spec-BENCH--c1", "SERVE--spec-BENCH--c4"):
        shutil.copytree(SWEEP / combo, spec / combo)
    (spec / "SERVE--spec-BENCH--c4" / "run=1.json").unlink()
    failure = {"run_number": 1, "error_type": "CalledProcessError", "error": "exit 1"}
    (spec / "SERVE--spec-BENCH--c4" / "run=1.failure.json").write_text(json.dumps(failure))
    (spec / "SERVE--spec-BENCH--c4" / "summary.json").write_text("[]")  # the sweep's own list: not a run
    inputs = inputs_from_results(PLAIN, spec)
    assert sorted((r.arm, r.level, r.repeat) for r in inputs.runs if r.level == "c4") == [
        ("baseline", "c4", 1),
        ("candidate", "c4", 1),
    ]
    said = [warning_text(n) for n in inputs.notes]
    assert any("at concurrency 4: A has 2 runs and B 1; the first 1 of each are compared" in n for n in said)
    assert any("the sweep also wrote run=1.failure.json (failed runs, not compared)" in n for n in said)


def test_a_directory_without_runs_is_not_a_sweep(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert not vllm_sweep.detect(tmp_path / "empty") and not vllm_sweep.detect(tmp_path / "SERVE--nothing")
    assert result_format(tmp_path / "empty") == "speculab"  # a directory is a bench run's unless it holds runs


def test_a_file_format_given_for_a_directory_is_one_line_naming_the_fix(tmp_path: Path, capsys) -> None:
    combo = SWEEP / "SERVE--plain-BENCH--c1"
    code, _, err = run_main(capsys, "compare", str(combo), str(combo), "--format", "vllm", "--output", str(tmp_path))
    line = one_line_error(err)
    assert code == 2 and f"{combo} is a directory: --format vllm reads a file" in line and "vllm-sweep" in line, line
