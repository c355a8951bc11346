"""`speculab compare --fail-on` (issue 40): a candidate that streams slower exits 5 once the report is written; the
same pair passes a gate that names only `worse`."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes.cli_runner import one_line_error, run_main
from integration.test_compare_margin import _bench  # one bench run: 24 synthetic prompts, one at a time
from speculab.mock.script import MockConfig
from speculab.mock.server import mock_server_in_thread

# both tests judge a candidate twice as slow per token from in-process mocks' timings: in the idle background a
# starved client blurred it to no verdict (exit 0, not 5) twice in three runs on the slow VM (2026-12-07)
pytestmark = pytest.mark.paced


def test_compare_fails_on_a_slower_candidate(tmp_path: Path, capsys) -> None:
    # the candidate's gaps are twice the baseline's: slower per token beyond any small margin
    with (
        mock_server_in_thread(MockConfig(ttft_s=0.004, gap_s=0.004, output_tokens=12)) as a,
        mock_server_in_thread(MockConfig(ttft_s=0.004, gap_s=0.008, output_tokens=12)) as b,
    ):
        _bench(a, tmp_path / "a")
        _bench(b, tmp_path / "b")
    args = ("compare", str(tmp_path / "a"), str(tmp_path / "b"))
    code, out, err = run_main(capsys, *args, "--output", str(tmp_path / "ab"), "--fail-on", "slower")
    # exit 0 with nothing on stderr once in the suite (2026-12-07), not seen alone: what compare printed says why
    assert code == 5 and ": slower" in one_line_error(err), f"exit {code}\n{out}\n{err}"
    assert (tmp_path / "ab" / "summary.json").is_file() and (tmp_path / "ab" / "report.html").is_file()
    code, _, err = run_main(capsys, *args, "--output", str(tmp_path / "ab2"), "--fail-on", "worse")
    assert code == 0, err


def test_run_fails_on_a_slower_candidate_and_a_misspelt_answer_runs_nothing(tmp_path: Path, capsys) -> None:
    with (
        mock_server_in_thread(MockConfig(ttft_s=0.002, gap_s=0.004, output_tokens=8)) as a,
        mock_server_in_thread(MockConfig(ttft_s=0.002, gap_s=0.008, output_tokens=8)) as b,
    ):
        exp = tmp_path / "exp.yaml"
        exp.write_text(
            'workload: {spec: "synthetic:input=10,output=8", num_prompts: 16, warmup_requests: 1}\n'
            "sampling: {max_tokens: 8}\n"
            "loads: {operating: {concurrency: 1}}\n"
            f'baseline: {{url: "{a}"}}\ncandidate: {{url: "{b}"}}\n'
            "speculation: {method: ngram, num_speculative_tokens: 4}\n"
        )
        code, _, err = run_main(capsys, "run", str(exp), "--output", str(tmp_path / "typo"), "--fail-on", "slow")
        assert code == 2 and "--fail-on: no answer 'slow'" in one_line_error(err)
        assert not (tmp_path / "typo").exists()
        code, _, err = run_main(capsys, "run", str(exp), "--output", str(tmp_path / "ab"), "--fail-on", "slower")
    assert code == 5, err
    assert ": slower" in err.strip().splitlines()[-1]
    assert (tmp_path / "ab" / "summary.json").is_file() and (tmp_path / "ab" / "comparisons.csv").is_file()
