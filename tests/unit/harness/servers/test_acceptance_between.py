"""Acceptance over a window from what each engine reports: counters diffed around the level (warmup excluded),
llama.cpp per-response timings, SGLang gauges, and vLLM-style counters behind an `other` engine (`speculab bench`),
with the reason when there is none; and its two on-disk forms."""

from __future__ import annotations

from pathlib import Path

import pytest

from speculab.harness.records import AcceptanceSummary, RequestRecord
from speculab.harness.results.warnings import WarningKind
from speculab.harness.servers.acceptance import acceptance_between, acceptance_with_reason
from speculab.harness.servers.adapters import adapter_for
from speculab.harness.servers.scrape import MetricsSnapshot, counter_deltas, parse_metrics
from speculab.report.phrases import reason_text

FIXTURES = Path(__file__).parent / "fixtures"
OTHER = adapter_for("other")  # what `speculab bench` passes: no engine named


def counters(prefix: str, drafts: float, drafted: float, accepted: float, per_pos: tuple[float, ...] = ()) -> str:
    lines = [
        f"# TYPE {prefix}:spec_decode_num_drafts counter",
        f'{prefix}:spec_decode_num_drafts_total{{model_name="m"}} {drafts}',
        f"# TYPE {prefix}:spec_decode_num_draft_tokens counter",
        f'{prefix}:spec_decode_num_draft_tokens_total{{model_name="m"}} {drafted}',
        f"# TYPE {prefix}:spec_decode_num_accepted_tokens counter",
        f'{prefix}:spec_decode_num_accepted_tokens_total{{model_name="m"}} {accepted}',
        f"# TYPE {prefix}:spec_decode_num_accepted_tokens_per_pos counter",
    ]
    lines += [
        f'{prefix}:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {v}' for i, v in enumerate(per_pos)
    ]
    return "\n".join(lines) + "\n"


def test_vllm_counters_are_diffed_around_the_level() -> None:
    before = parse_metrics(counters("vllm", 10, 40, 20, (8, 6, 4, 2)))
    after = parse_metrics(counters("vllm", 110, 440, 320, (98, 86, 74, 62)))
    acc = acceptance_between(adapter_for("vllm"), before, after, [], 4)
    assert acc is not None and acc.active and acc.source == "vllm:spec_decode_* counters (server-wide delta)"
    assert acc.drafts == 100 and acc.acceptance_rate == pytest.approx(300 / 400)
    assert acc.acceptance_length == pytest.approx(4.0) and acc.per_position == pytest.approx((0.9, 0.8, 0.7, 0.6))
    deltas = counter_deltas(before, after)
    assert deltas["vllm:spec_decode_num_drafts_total"] == 100


def test_counters_that_did_not_move_mean_not_active_and_a_reset_means_unknown() -> None:
    snap = parse_metrics(counters("speculab", 5, 20, 10))
    acc = acceptance_between(adapter_for("speculab"), snap, snap, [], 4)
    assert acc is not None and not acc.active  # the candidate made no drafts: "speculation not active"
    reset = parse_metrics(counters("speculab", 1, 4, 2))
    assert acceptance_between(adapter_for("speculab"), snap, reset, [], 4) is None


def test_other_engine_with_vllm_counters_and_engine_without_any() -> None:
    before = parse_metrics(counters("vllm", 0, 0, 0))
    after = parse_metrics(counters("vllm", 10, 20, 10))
    acc = acceptance_between(adapter_for("other"), before, after, [], 2)
    assert acc is not None and acc.acceptance_length == pytest.approx(2.0)
    plain = parse_metrics("# TYPE x counter\nx_total 1\n")
    assert acceptance_between(adapter_for("other"), plain, plain, [], 2) is None
    assert acceptance_between(adapter_for("vllm"), None, None, [], 2) is None


def test_llamacpp_timings_and_sglang_gauges() -> None:
    recs = [RequestRecord(i, 0.0, 0.0, 1.0, extra={"timings": {"draft_n": 8, "draft_n_accepted": 6}}) for i in range(3)]
    warm = RequestRecord(9, 0.0, 0.0, 1.0, warmup=True, extra={"timings": {"draft_n": 100, "draft_n_accepted": 0}})
    acc = acceptance_between(adapter_for("llamacpp"), None, None, [*recs, warm], 8)
    assert acc is not None and acc.draft_tokens == 24 and acc.acceptance_rate == pytest.approx(0.75)
    g = parse_metrics(
        "# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length 2.5\n"
        "# TYPE sglang:spec_accept_rate gauge\nsglang:spec_accept_rate 0.4\n"
    )
    acc = acceptance_between(adapter_for("sglang"), g, g, [], 4)
    assert acc is not None and acc.approximate and acc.acceptance_length == 2.5 and acc.acceptance_rate == 0.4


def _load(name: str) -> MetricsSnapshot:
    return parse_metrics((FIXTURES / name).read_text())


def _read(name: str) -> str:
    return (FIXTURES / name).read_text()


def spec_decode(before: MetricsSnapshot, after: MetricsSnapshot) -> tuple[AcceptanceSummary | None, str | None]:
    """What `speculab bench` reports: an active summary, or None with the reason (a record, in the report's words)."""
    acc, why = acceptance_with_reason(OTHER, before, after)
    return (acc if acc is not None and acc.active else None), (reason_text(why) if why is not None else None)


def spec_decode_stats(before: MetricsSnapshot, after: MetricsSnapshot) -> AcceptanceSummary | None:
    return spec_decode(before, after)[0]


def test_vllm_spec_decode_delta_is_summed_over_engines():
    stats = spec_decode_stats(_load("vllm_spec_before.prom"), _load("vllm_spec_after.prom"))
    assert stats is not None
    assert (stats.drafts, stats.draft_tokens, stats.accepted_tokens) == (1000, 3000, 1800)
    d = stats.to_spec_decode_dict()
    assert d["acceptance_rate"] == pytest.approx(0.6)
    assert d["acceptance_length"] == pytest.approx(2.8)
    assert d["per_position"] == pytest.approx([0.9, 0.6, 0.3])
    assert d["source"] == "vllm:spec_decode_* counters (server-wide delta)"
    assert (d["num_drafts"], d["num_draft_tokens"], d["num_accepted_tokens"]) == (1000, 3000, 1800)


def test_per_position_is_ordered_numerically():
    lines = ["# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter"]
    lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{p}"}} {12 - p}' for p in range(12)]
    lines += ["# TYPE vllm:spec_decode_num_drafts counter", "vllm:spec_decode_num_drafts_total 12"]
    lines += ["# TYPE vllm:spec_decode_num_draft_tokens counter", "vllm:spec_decode_num_draft_tokens_total 144"]
    lines += ["# TYPE vllm:spec_decode_num_accepted_tokens counter", "vllm:spec_decode_num_accepted_tokens_total 78"]
    after = parse_metrics("\n".join(lines) + "\n")
    stats = spec_decode_stats(parse_metrics(""), after)  # counters absent before: they started at zero
    assert stats is not None
    assert stats.per_position == pytest.approx([(12 - p) / 12 for p in range(12)])
    assert stats.acceptance_length == pytest.approx(1 + 78 / 12)


def test_counter_reset_gives_none_with_reason():
    before, after = _load("vllm_spec_after.prom"), _load("vllm_spec_before.prom")  # went backwards
    stats, reason = spec_decode(before, after)
    assert stats is None and "restarted" in reason
    assert spec_decode_stats(before, after) is None
    _, why = acceptance_with_reason(OTHER, before, after)  # the record: which counter, and its two readings
    assert why is not None and why.kind == WarningKind.COUNTER_WENT_BACKWARDS
    assert why.fields["counter"].startswith("vllm:spec_decode_") and why.fields["before"] > why.fields["after"]


def test_no_movement_and_no_counters_give_reasons():
    snap = _load("vllm_spec_before.prom")
    stats, reason = spec_decode(snap, snap)
    assert stats is None and reason == "vllm:spec_decode counters did not move: no speculative steps during the window"
    plain = parse_metrics("# TYPE vllm:prompt_tokens counter\nvllm:prompt_tokens_total 5\n")
    stats, reason = spec_decode(plain, plain)
    assert reason == "the server exposes no speculative-decoding metrics (vllm:, speculab:, llamacpp: or sglang:)"
    assert stats is None


def test_speculab_family_has_vllm_semantics():
    text = _read("vllm_spec_before.prom").replace("vllm:", "speculab:")
    after = _read("vllm_spec_after.prom").replace("vllm:", "speculab:")
    stats = spec_decode_stats(parse_metrics(text), parse_metrics(after))
    assert stats is not None and stats.acceptance_length == pytest.approx(2.8)
    assert stats.source.startswith("speculab:spec_decode_*")


def test_sglang_gauges_are_read_not_diffed():
    snap = _load("sglang_spec.prom")
    stats = spec_decode_stats(parse_metrics(""), snap)
    assert stats is not None
    assert stats.acceptance_length == pytest.approx(2.8)  # mean over the two TP ranks
    assert stats.acceptance_rate == pytest.approx(0.62)
    assert stats.drafts is None and stats.per_position == ()
    assert "not a delta" in stats.source
    zero = parse_metrics("# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length 0\n")
    assert spec_decode_stats(zero, zero) is None


def test_the_two_on_disk_forms_round_trip() -> None:
    stats = spec_decode_stats(_load("vllm_spec_before.prom"), _load("vllm_spec_after.prom"))
    assert stats is not None
    assert AcceptanceSummary.from_dict(stats.to_dict()) == stats
    again = AcceptanceSummary.from_spec_decode_dict(stats.to_spec_decode_dict())
    assert again is not None and again.active and again.acceptance_length == pytest.approx(stats.acceptance_length)
    assert AcceptanceSummary.from_spec_decode_dict(None) is None
