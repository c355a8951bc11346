"""The speculation counters a /metrics sample keeps (issue 52: acceptance and the k in use over a phased load): read
by the names the engine's adapter gives, nothing for an engine that counts none."""

from __future__ import annotations

from speculab.harness.servers.adapters import adapter_for
from speculab.harness.servers.memory import spec_counters
from speculab.harness.servers.scrape import parse_metrics

TEXT = """# TYPE speculab:spec_decode_num_draft_tokens counter
speculab:spec_decode_num_draft_tokens_total{model_name="m"} 40.0
# TYPE speculab:spec_decode_num_accepted_tokens counter
speculab:spec_decode_num_accepted_tokens_total{model_name="m"} 30.0
# TYPE speculab:spec_decode_num_steps counter
speculab:spec_decode_num_steps_total{model_name="m",k="0"} 5.0
speculab:spec_decode_num_steps_total{model_name="m",k="4"} 10.0
"""


def test_the_reference_engine_counts_acceptance_and_steps_by_k():
    got = spec_counters(parse_metrics(TEXT), adapter_for("speculab").acceptance)
    assert got == {"draft_tokens": 40.0, "accepted_tokens": 30.0, "k=0": 5.0, "k=4": 10.0}


def test_an_engine_without_them_or_no_scrape_keeps_none():
    assert spec_counters(parse_metrics(TEXT), adapter_for("other").acceptance) == {}
    assert spec_counters(None, adapter_for("speculab").acceptance) == {}
    vllm = spec_counters(parse_metrics(TEXT.replace("speculab:", "vllm:")), adapter_for("vllm").acceptance)
    assert vllm == {"draft_tokens": 40.0, "accepted_tokens": 30.0}  # vLLM keeps k fixed: no steps by k
