"""Acceptance summaries from counters, gauges and per-response fields (llama.cpp's aggregator is its adapter's)."""

from __future__ import annotations

import pytest

from speculab.harness.servers.acceptance import from_counters, from_gauges
from speculab.harness.servers.adapters import adapter_for
from speculab.harness.servers.adapters.llamacpp import from_timings


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
    assert not from_timings([{"draft_n": 0}, {}]).active
    assert not from_gauges("sglang", 1.0, 0.0).active


def test_llamacpp_per_response_and_gauges():
    s = from_timings([{"draft_n": 16, "draft_n_accepted": 12}, {"draft_n": 16, "draft_n_accepted": 4}], k=4)
    assert s.acceptance_rate == pytest.approx(0.5)
    assert s.acceptance_length == pytest.approx(1 + 16 / 8) and s.approximate
    g = from_gauges("sglang", 2.5, 0.4)
    assert g.to_dict()["acceptance_length"] == 2.5
    assert g.source == "sglang gauges (server-wide, recent window; read, not a delta)"  # as saved runs name it
