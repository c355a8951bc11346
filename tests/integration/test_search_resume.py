"""`speculab run --resume DIR` on a search (issue 39): `kill -9` of `speculab run` at a seeded random moment in its
first round and of the resumed run at one later on, through the search on the two mocks of test_search_crossover.py
(speculation stops paying at concurrency 24), then `--resume`, ends as an uninterrupted search does: its interval
holds the truth, at most 12 streams wide, after at most 10 probes; the levels placed before each kill are kept as
they were, and nothing recorded is lost."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from integration.mock_process import mock_child
from integration.test_resume import HANG_S, _cli, _kill_at, _lines
from integration.test_search_crossover import PLAIN, SPEC, done_means_yaml
from speculab.mock.script import MockConfig
from speculab.mock.truth import true_crossover

# a search's records: its first round (1, 7, 48) sends 6 groups at each, 336 prompts an arm; each later probe
# 6 x its concurrency (about 20, then 26: some 240 and 310 records). The moments fall in the first round, the second
# and the third (a run that ends first is resumed as complete: the test accepts that too)
FIRST_ROUND = 2 * 6 * (1 + 7 + 48)
# One search killed twice, to keep the suite's time (each search on the mocks takes ~25 s): in its first round, then
# the resumed run in its second or third; the unit tests (tests/unit/commands/run/test_search_rounds.py) resume from
# every round boundary without servers.
MOMENTS = ((1, FIRST_ROUND - 50),)
LATER = (FIRST_ROUND + 20, FIRST_ROUND + 500)


def _levels(out: Path) -> list[str]:
    """The levels inputs.json records (a search's probes, in the order placed)."""
    return [lv["key"] for lv in json.loads((out / "inputs.json").read_text())["setup"]["levels"]]


def _kill_then_resume(trial: int, moment: int, exp: Path, out: Path, truth: float, later: int) -> None:
    on_disk = _kill_at(_cli("run", str(exp), "--output", str(out)), out, moment)
    placed = _levels(out)
    if on_disk is not None:  # the resumed search killed in turn, later on
        on_disk = _kill_at(_cli("run", "--resume", str(out)), out, later) or on_disk
        placed = _levels(out)
    resumed = _cli("run", "--resume", str(out))
    _, stderr = resumed.communicate(timeout=HANG_S)
    assert resumed.returncode == 0, f"trial {trial} (killed at {moment} records): {stderr[-2000:]}"
    assert "Traceback" not in stderr
    summary = json.loads((out / "summary.json").read_text())
    search = summary["search"]
    assert _levels(out)[: len(placed)] == placed  # the probes placed before the kill count, as they were
    if on_disk is not None:
        assert f"resuming {out}: the search" in stderr
        assert _lines(out, aside=True) >= on_disk  # nothing recorded before the kill was lost
        assert any("resumed at" in json.dumps(w) for w in summary["warnings"])
    else:  # the run ended before the moment came: a resume has nothing to place
        assert f"resuming {out}: the search is complete" in stderr
    assert summary["interrupted"] is False and search["stop"] == "tolerance", search
    c = search["crossover"]
    assert search["status"] == "crosses" and c["low"] <= truth <= c["high"], (trial, moment, c, search["probes"])
    assert c["high"] - c["low"] <= 12 and len(search["probes"]) <= 10, (trial, moment, c, search["probes"])
    assert {lv["value"] for lv in summary["levels"]} == set(search["probes"])  # every probe a level, once


@pytest.mark.slow
@pytest.mark.paced  # the mock's scripted times, held loosely: beside paced tests, not ordinary ones
def test_kill_9_at_random_moments_through_a_search_then_resume_finds_the_known_crossover(tmp_path: Path) -> None:
    truth = true_crossover(MockConfig(**PLAIN), MockConfig(**SPEC))
    rng = random.Random(39)
    # the mocks' timing is the truth, so the trials run one after another (a second search at once would slow both)
    with mock_child(**PLAIN) as (url_a, _), mock_child(**SPEC) as (url_b, _):
        exp = tmp_path / "exp.yaml"
        exp.write_text(done_means_yaml(url_a, url_b))
        for trial, (lo, hi) in enumerate(MOMENTS):
            _kill_then_resume(trial, rng.randint(lo, hi), exp, tmp_path / f"run{trial}", truth, rng.randint(*LATER))
