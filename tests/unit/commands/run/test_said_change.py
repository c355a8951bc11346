"""Two-URL mode cannot verify the single change from commands it never ran; where both servers say what they run
(speculab serve's /version, recorded in each arm's server_info), the run checks it from their words (issue 36)."""

from __future__ import annotations

from speculab.commands.run.lifecycle import RunRecord
from speculab.harness.design import ArmInfo
from speculab.harness.results.ab_run import SAID_NOTE, ChangeCheck, not_checked

NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}
ARGS = {"model": "demo", "max_num_seqs": 8, "max_model_len": 512}


def _info(spec: dict | None, **args: object) -> dict:
    version = {
        "name": "speculab",
        "speculative_config": spec,
        "server_args": ARGS | args | {"speculative_config": spec},
    }
    return {"version": version, "models": [], "detected_engine": "speculab"}


def _checked(base_info: dict, cand_info: dict) -> ChangeCheck:
    base = ArmInfo("baseline", "plain", server_info=base_info)
    cand = ArmInfo("ngram-k4", "ngram k=4", method="ngram", num_speculative_tokens=4, server_info=cand_info)
    record = RunRecord(setup=None, arms=(base, cand))  # type: ignore[arg-type]  # the check reads only the arms
    unverified = ChangeCheck("ngram-k4", (), None, not_checked("two_url"))
    return record.said_change(unverified, base)


def test_two_servers_that_say_they_differ_only_in_speculation_are_a_verified_single_change() -> None:
    check = _checked(_info(None), _info(NGRAM))
    assert check.verified is True and check.note == SAID_NOTE and "--speculative-config" in check.diff_lines[0]


def test_a_difference_beyond_speculation_is_named() -> None:
    check = _checked(_info(None), _info(NGRAM, max_num_seqs=16))
    assert check.verified is False and any("--max-num-seqs" in line for line in check.diff_lines)


def test_a_server_that_says_nothing_leaves_the_change_unverified() -> None:
    vllm = {"version": {"version": "0.32.0"}, "models": [], "detected_engine": "vllm"}
    for base, cand in (
        (_info(None), vllm),
        ({}, _info(NGRAM)),
        (_info(None), {"version": "0.1", "detected_engine": "x"}),
    ):
        check = _checked(base, cand)
        assert check.verified is None and check.note == not_checked("two_url")
