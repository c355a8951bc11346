"""The predicted k schedule in the engine's words: vLLM's per-batch-size k where its release has it, the reference
engine's drafts off above an edge (the lowest band's k), else the lowest band's k; the measured K stays the maximum."""

from __future__ import annotations

import json

from speculab.commands.predict.schedule import batch_schedule, engine_schedule
from speculab.config import SpeculationConfig
from speculab.harness.search.predict import KBand

K4 = SpeculationConfig("ngram", 4)
MOVES = (KBand(1.0, 3.6, 3), KBand(4.1, 15.2, 2), KBand(16.8, 64.0, 1))


def _config(flags: tuple[str, ...]) -> dict:
    return json.loads(flags[flags.index("--speculative-config") + 1])


def test_bands_become_whole_batch_sizes_from_one_upwards():
    assert batch_schedule(MOVES) == [[1, 3, 3], [4, 15, 2], [16, 4096, 1]]
    assert batch_schedule((KBand(1, 7.9, 2), KBand(8.3, 9.7, 2), KBand(10.2, 32, 0))) == [[1, 9, 2], [10, 4096, 0]]


def test_vllm_gets_its_per_batch_size_k_with_the_measured_k_as_the_maximum():
    said = engine_schedule(K4, MOVES, "vllm", "0.32.0")
    cfg = _config(said.flags)
    assert said.form == "batch-size schedule" and cfg["num_speculative_tokens"] == 4
    assert cfg["num_speculative_tokens_per_batch_size"] == [[1, 3, 3], [4, 15, 2], [16, 4096, 1]]
    older = engine_schedule(K4, MOVES, "vllm", "0.10.0")  # a release without it: the lowest band's k, said so
    assert older.form == "lowest band" and _config(older.flags)["num_speculative_tokens"] == 3


def test_the_reference_engine_turns_drafts_off_above_the_edge_and_keys_no_k_on_the_batch_size():
    off = engine_schedule(K4, (KBand(1, 11.3, 4), KBand(12.0, 64, 0)), "speculab", "")
    assert off.form == "off-above" and _config(off.flags)["disable_by_batch_size"] == 11
    # k changing with the batch: the lowest band's k up to its edge, drafts off above (never the engine's adaptive
    # k, a policy no probe measured)
    moves = engine_schedule(K4, MOVES, "speculab", "")
    assert moves.form == "off-above (per-load)" and _config(moves.flags) == {
        "method": "ngram", "num_speculative_tokens": 3, "disable_by_batch_size": 3}  # fmt: skip
    assert any("keys no k on the batch size" in n for n in moves.notes)


def test_one_k_everywhere_is_a_single_config_and_no_k_is_plain():
    assert _config(engine_schedule(K4, (KBand(1, 64, 2),), "vllm", "0.32.0").flags)["num_speculative_tokens"] == 2
    plain = engine_schedule(K4, (KBand(1, 64, 0),), "vllm", "0.32.0")
    assert plain.form == "plain" and plain.flags == () and plain.speculation is None
