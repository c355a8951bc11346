"""`LevelSpec` of a load a result file does not state (#51): a kind of its own, never a number standing for it."""

from __future__ import annotations

import json

import pytest

from speculab.harness.analysis.groups import group_size
from speculab.harness.design import UNKNOWN, LevelSpec


def test_an_unknown_load_is_its_own_kind_and_survives_a_saved_file() -> None:
    lv = LevelSpec(UNKNOWN, 0, ("low", "operating"))
    assert (lv.key, lv.label, lv.open_loop, lv.requested_rate_rps) == ("unknown", "load not in the file", False, None)
    assert lv.key != LevelSpec("concurrency", 1).key  # it pairs with no stated load
    assert LevelSpec.from_dict(json.loads(json.dumps(lv.to_dict()))) == lv  # as inputs.json keeps it
    assert group_size(lv.kind, lv.value, (3.2,)) == 3  # what was in flight is measured, not the unknown load


def test_an_unknown_load_holds_no_number() -> None:
    with pytest.raises(ValueError, match="unknown load must be 0"):
        LevelSpec(UNKNOWN, 1)
