"""Acceptance summaries from counters and per-response fields."""

from __future__ import annotations

import pytest

from speculab.harness.servers.acceptance import (
    from_counters,
    from_llamacpp_timings,
    from_sglang_gauges,
    from_sglang_meta,
)
from speculab.harness.servers.adapters import adapter_for


def test_vllm_counters_follow_vllm_definitions():
    m = adapter_for("vllm").acceptance
    deltas = {m.drafts: 100.0, m.draft_tokens: 400.0, m.accepted_tokens: 190.0}
    s = from_counters("vllm", m, deltas, {0: 80.0, 1: 60.0, 2: 30.0, 3: 20.0})
    assert s.active and s.source == "vllm:spec_decode_* counters (server-wide delta)"
    assert s.acceptance_rate == pytest.approx(190 / 400)
    assert s.acceptance_length == pytest.approx(2.9)
    assert s.per_position == (0.8, 0.6, 0.3, 0.2)


def test_no_drafts_means_not_active():
    m = adapter_for("speculab").acceptance
    s = from_counters("speculab", m, {m.drafts: 0.0}, {})
    assert not s.active and s.acceptance_rate is None
    assert not from_llamacpp_timings([{"draft_n": 0}, {}]).active
    assert not from_sglang_meta([{"completion_tokens": 10}]).active
    assert not from_sglang_gauges(1.0, 0.0).active


def test_llamacpp_and_sglang_per_response():
    s = from_llamacpp_timings([{"draft_n": 16, "draft_n_accepted": 12}, {"draft_n": 16, "draft_n_accepted": 4}], k=4)
    assert s.acceptance_rate == pytest.approx(0.5)
    assert s.acceptance_length == pytest.approx(1 + 16 / 8) and s.approximate
    g = from_sglang_meta(
        [{"completion_tokens": 90, "spec_verify_ct": 30}, {"completion_tokens": 30, "spec_verify_ct": 10}], k=4
    )
    assert g.acceptance_length == pytest.approx(3.0) and g.accepted_tokens == 80
    assert g.acceptance_rate == pytest.approx(0.5)
    assert from_sglang_gauges(2.5, 0.4).to_dict()["acceptance_length"] == 2.5
