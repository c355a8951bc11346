"""Acceptance per load level from what each engine reports: counters diffed around the level (warmup excluded by
the caller), llama.cpp per-response timings, SGLang gauges, and vLLM-style counters behind an `other` engine."""

from __future__ import annotations

import pytest

from speculab.bench.engines import adapter_for
from speculab.bench.experiment import acceptance_between, counter_deltas
from speculab.bench.records import RequestRecord
from speculab.bench.scrape import parse_metrics


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
    assert acc is not None and acc.active and acc.source == "vllm counters (server-wide)"
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
