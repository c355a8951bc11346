"""Why acceptance is unknown, the server-gone evidence and the plan's warnings, worded by the report from their records
(#48 item 3): each says the sentence the harness or the command wrote when they were strings, and a record an older
file kept as its sentence (a note) says that sentence."""

from __future__ import annotations

import pytest

from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.report.phrases import reason_text, warning_text

K = WarningKind
WHY = [
    (K.NO_DRAFTED_TOKENS, {"source": "speculab usage (per response, summed)"}, "speculab usage (per response, summed) "
     "shows no drafted tokens"),
    (K.NO_SPEC_METRICS, {"prefixes": ["vllm:", "speculab:", "llamacpp:", "sglang:"]},
     "the server exposes no speculative-decoding metrics (vllm:, speculab:, llamacpp: or sglang:)"),
    (K.COUNTER_WENT_BACKWARDS, {"counter": "vllm:spec_decode_num_drafts_total", "before": 5.0, "after": 1.0},
     "vllm:spec_decode_num_drafts_total went backwards (5 -> 1): the server restarted between scrapes"),
    (K.COUNTER_WENT_BACKWARDS, {"counter": "vllm:per_pos_total", "before": None, "after": None},
     "vllm:per_pos_total went backwards: the server restarted between scrapes"),
    (K.COUNTERS_INCONSISTENT, {"accepted": "a_total", "drafted": "d_total", "accepted_delta": 50.0,
                               "drafted_delta": 20.0}, "a_total grew more than d_total (50 > 20): the counters are "
     "inconsistent"),
    (K.COUNTERS_DID_NOT_MOVE, {"engine": "vllm"},
     "vllm:spec_decode counters did not move: no speculative steps during the window"),
    (K.GAUGES_OUT_OF_RANGE, {"length_gauge": "l", "rate_gauge": "r", "length": 2.5, "rates": [1.5]},
     "l / r are out of range (length 2.5, rates [1.5]): not trusted"),
    (K.GAUGE_NO_STEPS, {"length_gauge": "sglang:spec_accept_length", "length": 0.5},
     "sglang:spec_accept_length is 0.5: no speculative steps reported"),
    (K.METRICS_UNREAD, {"how": "absent"}, "no Prometheus /metrics at the endpoint"),
    (K.METRICS_UNREAD, {"how": "disabled"}, "metrics scraping disabled"),
    (K.METRICS_UNREAD, {"how": "after"}, "/metrics could not be read after the run"),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "fields", "sentence"), WHY)
def test_why_acceptance_is_unknown_says_its_sentence(kind, fields, sentence):
    why = ReportWarning(kind, fields=fields)
    assert reason_text(why) == sentence
    # an A/B repeat's note carries it inside (inputs.json keeps the record; an older one, the sentence)
    for kept in (why.to_dict(), sentence):
        note = ReportWarning(K.ACCEPTANCE_UNKNOWN, fields={"why": kept})
        assert warning_text(note) == f"acceptance unknown: {sentence}"


def test_the_server_gone_evidence_from_its_numbers_or_an_older_files_sentence():
    seen = "3 requests in a row could not connect (connect: refused), nor could 3 probes of /v1/models over 1.5 s"
    fields = {"failures": 3, "detail": "connect: refused", "probes": 3, "probe_s": 1.54}
    said = f"the server stopped answering mid-run, and the run stopped there: {seen}"
    assert warning_text(ReportWarning(K.SERVER_GONE, fields=fields)) == said
    assert warning_text(ReportWarning(K.SERVER_GONE, fields={"evidence": seen})) == said  # bench summary.json /2


UNCHECKED = {
    "two_url": "in two-URL mode speculab launches no candidate",
    "whole_command": "candidate.command is given whole",
    "no_command": "no launch command",
    "not_askable": "speculab cannot ask engine other what it accepts",
    "unreadable": "vllm could not be read; the engine will say at launch",
}


def test_the_plans_warnings_say_what_went_unchecked_and_why():
    what = {"methods": ["suffix"], "options_of": ["ngram k=2"], "engine": "other", "problem": "vllm could not be read"}
    for why, said in UNCHECKED.items():
        w = ReportWarning(K.METHODS_UNCHECKED, fields={**what, "why": why})
        assert warning_text(w) == f"warning: speculation method suffix and speculation.options of ngram k=2 are " \
            f"unchecked: {said}"  # fmt: skip
    gone = {**what, "methods": [], "engine": "sglang", "release": "0.5.2", "why": "options_unreadable"}
    assert warning_text(ReportWarning(K.METHODS_UNCHECKED, fields=gone)) == (
        "warning: speculation.options of ngram k=2 is unchecked: sglang 0.5.2's speculation options could not be read"
    )
    few = {"at": "concurrency 4", "n": 10, "what": "conversations", "groups": 3, "size": 4, "min_groups": 6}
    assert warning_text(ReportWarning(K.FEW_GROUPS, fields=few)) == (
        "warning: at concurrency 4 the 10 conversations make 3 groups of 4 sent together; for a verdict they need at "
        "least 6 groups: use at least 24 conversations at this load (num_prompts counts their requests)"
    )
