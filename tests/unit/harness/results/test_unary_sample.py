"""The stream against unary sample (issue 50 item 3.2): which prompts each arm also sends unary (seeded, single-turn,
of its first load, none above temperature 0), and its file beside the arm's levels, read back apart from the measured
records."""

from __future__ import annotations

from dataclasses import replace

from tests.fakes.ab_inputs import make_inputs

from speculab.harness.design import LevelSpec, stream_unary_sample
from speculab.harness.records import RequestRecord
from speculab.harness.results.ab_dir import load_inputs, save_inputs, unary_file


def test_the_sample_is_seeded_single_turn_from_the_first_load_and_none_above_temperature_zero():
    setup = replace(make_inputs(n_prompts=30, repeats=1).setup, stream_unary=8)
    sample = stream_unary_sample(setup)
    assert len(sample) == 8 and [s.index for s in sample] == sorted(s.index for s in sample)
    assert stream_unary_sample(setup) == sample and stream_unary_sample(replace(setup, seed=1)) != sample
    turns = tuple(replace(it, conversation_id="c", turn=1) if it.index % 2 else it for it in setup.items)
    assert all(s.turn is None for s in stream_unary_sample(replace(setup, items=turns)))
    first = (LevelSpec("concurrency", 1, prompts=5), *setup.levels)
    assert all(s.index < 5 for s in stream_unary_sample(replace(setup, levels=first)))
    assert len(stream_unary_sample(replace(setup, levels=first, stream_unary=50))) == 5  # as many as there are
    assert stream_unary_sample(replace(setup, temperature=0.7)) == ()
    assert stream_unary_sample(replace(setup, stream_unary=0)) == ()


def test_an_arms_unary_answers_are_a_file_of_their_own_read_back_apart_from_its_runs(tmp_path):
    inputs = make_inputs(n_prompts=6, repeats=1)
    unary = (RequestRecord(2, 0.0, 0.0, 1.0, output_text="whole", stream=False),)
    save_inputs(tmp_path, replace(inputs, unary={"ngram-k4": unary}))
    assert unary_file(tmp_path, "ngram-k4").is_file() and not unary_file(tmp_path, "baseline").exists()
    back = load_inputs(tmp_path)
    assert back.unary == {"ngram-k4": unary}
    assert len(back.runs) == len(inputs.runs)  # no level read from the file
    assert all(r.records[0].output_text != "whole" for r in back.runs)
