"""`speculab compare` of suites' aggregate files (#51 items 4 and 5), through the CLI: for each tool an on/off pair
(two files, or one file split by --a-row / --b-row) compares with rc 0, its B/A ratios point the way the files' own
figures do, and the acceptance a file states is shown on its arm with the file's key."""

from __future__ import annotations

import json
from pathlib import Path

from fakes.cli_runner import one_line_error, run_main

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "imports"


def _ratio(stdout: str, label: str) -> float:
    """The B/A cell of the terminal's row `label` (e.g. "TPOT median")."""
    row = next(ln for ln in stdout.splitlines() if ln.strip("│┃ ").startswith(label))
    return float([c.strip() for c in row.split("│") if c.strip()][-1])


def _side(stdout: str, side: str) -> str:
    return next(ln for ln in stdout.splitlines() if ln.startswith(f"{side}: "))


def _compare(capsys, tmp_path: Path, *args: str) -> str:
    code, stdout, err = run_main(capsys, "compare", *args, "--output", str(tmp_path / "cmp"))
    assert code == 0, err
    assert (tmp_path / "cmp" / "summary.json").is_file()
    return stdout


def test_inferencex_collection_split_by_rows_shows_mtp_faster_per_token(capsys, tmp_path: Path) -> None:
    path = FIXTURES / "inferencex" / "collected" / "agg_demo.json"
    rows = {(r["spec_decoding"], r["conc"]): r for r in json.loads(path.read_text())}
    stdout = _compare(capsys, tmp_path, str(path), "--a-row", "spec_decoding=none", "--b-row", "spec_decoding=mtp")
    own = rows[("mtp", 4)]["median_tpot"] / rows[("none", 4)]["median_tpot"]
    assert own < 1 and abs(_ratio(stdout, "TPOT median") - own) < 1e-3
    assert "spec_decoding none" in _side(stdout, "A") and "spec_decoding mtp" in _side(stdout, "B")
    assert "InferenceX (single-node layout)" in _side(stdout, "A")
    # the baseline's row at concurrency 1 has no MTP row to meet: left out, and said
    assert "A: its rows at concurrency 1 have none of the other arm's at that load" in stdout


def test_inferencex_two_files_of_the_multi_node_layout(capsys, tmp_path: Path) -> None:
    here = FIXTURES / "inferencex" / "multi-node"
    stdout = _compare(capsys, tmp_path, str(here / "agg_baseline.json"), str(here / "agg_candidate.json"))
    assert _ratio(stdout, "TPOT median") < 1 and _ratio(stdout, "output tok/s") > 1
    assert "multi-node (disaggregated) layout" in _side(stdout, "B")


def test_draftbench_one_file_split_into_baseline_and_draft_shows_the_draft_s_rate(capsys, tmp_path: Path) -> None:
    path = FIXTURES / "draftbench" / "m4max-128gb_llamacpp_qwen25-14b.json"
    raw = json.loads(path.read_text())["results"]
    base, draft = raw[23], raw[25]  # 14B Q8_0 alone, and with the 0.5B Q8_0 draft
    stdout = _compare(capsys, tmp_path, str(path), "--a-row", "target=14B Q8_0,draft=none", "--b-row", "26")
    assert abs(_ratio(stdout, "TPOT median") - base["median_tps"] / draft["median_tps"]) < 1e-3
    assert _ratio(stdout, "TPOT median") < 1  # the author's draft row is the faster
    b = _side(stdout, "B")
    assert f"rate {draft['acceptance_rate']:.1%}" in b and "`acceptance_rate`" in b and "last request" in b
    assert "acceptance" not in _side(stdout, "A")


def test_specforge_lines_split_by_config_show_the_acceptance_length(capsys, tmp_path: Path) -> None:
    path = FIXTURES / "specforge" / "bench_model_speedup.jsonl"
    stdout = _compare(
        capsys, tmp_path, str(path), "--a-row", "steps=0,benchmark=gsm8k", "--b-row", "steps=3,benchmark=gsm8k"
    )
    assert abs(_ratio(stdout, "output tok/s") - 1642.67 / 691.19) < 1e-3
    b = _side(stdout, "B")
    assert "length 3.41 tokens per step" in b and "pooled" in b and "`acc_length`" in b


def test_trtllm_bench_reports_compare_with_the_speculative_one_s_acceptance(capsys, tmp_path: Path) -> None:
    here = FIXTURES / "trtllm-bench"
    stdout = _compare(capsys, tmp_path, str(here / "baseline.json"), str(here / "eagle3.json"))
    assert _ratio(stdout, "TPOT median") < 1 and _ratio(stdout, "output tok/s") > 1
    b = _side(stdout, "B")
    assert "length 2.83 tokens per step" in b and "rate 68.7%" in b
    assert "`decoding_stats.acceptance_length_percentiles.average`" in b and "mean of each request" in b
    assert "measured average concurrency" in b
    # on the arm in summary.json too, not only in the side's note (#51); the baseline's files state none
    (level,) = json.loads((tmp_path / "cmp" / "summary.json").read_text())["levels"]
    base, spec = level["arms"]
    assert "acceptance" not in base
    length = {"kind": "length", "value": 2.83, "weighting": "per_request_mean", "run": 1}
    assert spec["acceptance"][0] == length | {"source": "decoding_stats.acceptance_length_percentiles.average"}
    assert [(x["kind"], round(x["value"], 3)) for x in spec["acceptance"]] == [("length", 2.83), ("rate", 0.687)]


def test_a_file_of_several_configurations_unsplit_is_one_line_naming_the_flags(capsys) -> None:
    path = FIXTURES / "specforge" / "bench_model_speedup.jsonl"
    code, _, err = run_main(capsys, "compare", str(path), str(path))
    assert code == 2
    assert "of 4 configurations" in one_line_error(err) and "--a-row / --b-row" in err


def test_one_file_without_both_rows_is_one_line(capsys) -> None:
    code, _, err = run_main(capsys, "compare", str(FIXTURES / "specforge" / "bench_model_speedup.jsonl"))
    assert code == 2 and "with both --a-row and --b-row" in one_line_error(err)


def test_a_directory_of_inferencex_aggregates_is_split_by_their_fields_never_pooled(capsys, tmp_path: Path) -> None:
    """InferenceX leaves one agg_*.json per run in a directory: baseline and MTP side by side are two arms."""
    here = FIXTURES / "inferencex" / "single-node"
    code, _, err = run_main(capsys, "compare", str(here), str(here))
    assert code == 2 and "of 2 configurations (spec_decoding: " in one_line_error(err)
    stdout = _compare(capsys, tmp_path, str(here), "--a-row", "spec_decoding=none", "--b-row", "spec_decoding=mtp")
    assert _ratio(stdout, "TPOT median") < 1 and "spec_decoding mtp" in _side(stdout, "B")


def test_inferencemax_s_first_layout_splits_on_mtp_absent_on_the_baseline(capsys, tmp_path: Path) -> None:
    """The 2025 layout marks MTP runs with `mtp` and writes nothing on the baseline: a field a row lacks is none."""
    here = FIXTURES / "inferencex" / "inferencemax-2025"
    stdout = _compare(capsys, tmp_path, str(here), "--a-row", "mtp=none", "--b-row", "mtp=on")
    assert _ratio(stdout, "TPOT median") < 1
    assert _side(stdout, "A").endswith("row(s) 1: mtp none") and _side(stdout, "B").endswith("row(s) 1: mtp on")
