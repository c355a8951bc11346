"""`speculab compare` of two bench runs against the mock pairs them prompt by prompt. Alone on the machine (`serial`):
every stream must arrive in several chunks (TPOT pairs). `speculab init` and compare's other behaviour are
test_init_compare.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from integration.test_init_compare import _bench
from speculab.commands.compare.pairing import inputs_from_bench_dirs, inputs_from_results
from speculab.errors import UserError
from speculab.harness.verdict.build import build_report
from speculab.mock.script import MockConfig
from speculab.mock.server import mock_server_in_thread
from speculab.report.phrases import warning_text


# every stream must arrive in several chunks (TPOT pairs): on the held lane. The client and both mocks share one
# process: at 3 ms gaps one of 18 streams was read at once on the lane of a VM slowed 1.6x (2026-12-07), so 8 ms
@pytest.mark.serial
def test_compare_pairs_two_bench_runs(tmp_path: Path) -> None:
    plain = MockConfig(ttft_s=0.003, gap_s=0.008, output_tokens=16)
    spec = MockConfig(ttft_s=0.003, gap_s=0.008, output_tokens=16, tokens_per_chunk=4, num_speculative_tokens=3)
    with mock_server_in_thread(plain) as a, mock_server_in_thread(spec) as b:
        _bench(a, tmp_path / "a")
        _bench(b, tmp_path / "b")
        _bench(b, tmp_path / "b4", concurrency=4)
        _bench(b, tmp_path / "b18", prompts=18)
    inputs = inputs_from_bench_dirs(tmp_path / "a", tmp_path / "b")
    assert [a.name for a in inputs.arms] == ["baseline", "candidate"]
    assert inputs.changes[0].verified is None and "not interleaved" in warning_text(inputs.notes[0])
    assert len(inputs.setup.items) == 12 and inputs.setup.levels[0].key == "c2"
    cand = inputs.runs_for("candidate", "c2")[0]
    assert cand.acceptance is not None and cand.acceptance.acceptance_length == pytest.approx(4.0)
    report = build_report(inputs)
    assert report.level("c2").comparison("candidate").metric("tpot_s").verdict == "faster"
    with pytest.raises(UserError, match=r"cannot be paired: load.concurrency: 2 vs 4"):
        inputs_from_bench_dirs(tmp_path / "a", tmp_path / "b4")
    # another number of prompts: refused as a pair, compared when asked to as two samples (the load still must match)
    with pytest.raises(UserError, match=r"workload.n_items: 12 vs 18; .*with --unpaired\)"):
        inputs_from_results(tmp_path / "a", tmp_path / "b18")
    unpaired = inputs_from_results(tmp_path / "a", tmp_path / "b18", unpaired=True)
    assert not unpaired.setup.paired and unpaired.setup.items == ()
    tp = build_report(unpaired).level("c2").comparison("candidate").metric("tpot_s")
    assert tp.unit == "unpaired" and tp.samples == (18, 12) and tp.verdict == "faster"
    with pytest.raises(UserError, match=r"cannot be compared: load.concurrency: 2 vs 4"):
        inputs_from_results(tmp_path / "a", tmp_path / "b4", unpaired=True)
    with pytest.raises(UserError, match="give the output directory of a `speculab bench` run"):
        inputs_from_bench_dirs(tmp_path / "a", tmp_path / "nope")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "inputs.json").write_text(json.dumps({}))
    with pytest.raises(UserError, match="speculab report"):
        inputs_from_bench_dirs(tmp_path / "c", tmp_path / "a")
