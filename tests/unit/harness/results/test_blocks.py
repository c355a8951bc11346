"""What a resumed run reads from an A/B directory: each block's state, an interrupted block set aside (renamed,
never deleted, and skipped by the reader), and one run at a time per directory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fakes.ab_inputs import make_inputs
from speculab.errors import UserError
from speculab.harness.results.ab_dir import load_inputs, repeat_dir, save_inputs
from speculab.harness.results.blocks import BlockState, block_state, held_by_one_run, set_aside


def _block(root: Path, *, records: int | None, meta: dict | str | None) -> Path:
    d = repeat_dir(root, "baseline", "c1", 1)
    d.mkdir(parents=True)
    if records is not None:
        (d / "requests.jsonl").write_text("".join(f'{{"index": {i}}}\n' for i in range(records)))
    if isinstance(meta, str):
        (d / "run.json").write_text(meta)
    elif meta is not None:
        (d / "run.json").write_text(json.dumps(meta))
    return d


@pytest.mark.parametrize(
    ("records", "meta", "state"),
    [
        (None, None, BlockState.MISSING),  # an empty directory: never started
        (3, None, BlockState.INTERRUPTED),  # killed: records, no run.json
        (0, None, BlockState.INTERRUPTED),  # killed before its first record finished
        (3, {"interrupted": True}, BlockState.INTERRUPTED),  # Ctrl-C or a server that died: marked
        (3, "{not json", BlockState.INTERRUPTED),  # never ours (run.json is written atomically)
        (3, {"interrupted": False}, BlockState.COMPLETE),
    ],
)
def test_block_state(tmp_path: Path, records: int | None, meta: dict | str | None, state: BlockState) -> None:
    _block(tmp_path, records=records, meta=meta)
    assert block_state(tmp_path, "baseline", "c1", 1) is state
    assert block_state(tmp_path, "baseline", "c1", 2) is BlockState.MISSING  # no directory at all


def test_set_aside_renames_and_never_overwrites(tmp_path: Path) -> None:
    first = _block(tmp_path, records=3, meta=None)
    assert set_aside(tmp_path, "baseline", "c1", 1) == first.with_name("r1.interrupted-1")
    _block(tmp_path, records=5, meta=None)  # the rerun was killed too
    kept = set_aside(tmp_path, "baseline", "c1", 1)
    assert kept == first.with_name("r1.interrupted-2")
    assert len((kept / "requests.jsonl").read_text().splitlines()) == 5
    assert len((first.with_name("r1.interrupted-1") / "requests.jsonl").read_text().splitlines()) == 3
    assert not first.exists()
    assert set_aside(tmp_path, "baseline", "c1", 1) is None  # nothing there
    first.mkdir()
    assert set_aside(tmp_path, "baseline", "c1", 1) is None and not first.exists()  # empty: nothing to keep


def test_the_reader_skips_blocks_set_aside(tmp_path: Path) -> None:
    inputs = make_inputs()
    save_inputs(tmp_path, inputs)
    run = inputs.runs[0]
    d = repeat_dir(tmp_path, run.arm, run.level, run.repeat)
    d.rename(d.with_name(f"r{run.repeat}.interrupted-1"))
    got = load_inputs(tmp_path)
    assert len(got.runs) == len(inputs.runs) - 1
    assert (run.arm, run.level, run.repeat) not in {(r.arm, r.level, r.repeat) for r in got.runs}


def test_one_run_at_a_time_per_directory(tmp_path: Path) -> None:
    with (
        held_by_one_run(tmp_path),
        pytest.raises(UserError, match="being written by another speculab run that is still alive"),
        held_by_one_run(tmp_path),
    ):
        pass
    with held_by_one_run(tmp_path):  # released when the holder ends (a killed process: by the kernel)
        pass
