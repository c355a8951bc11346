"""Prometheus counters for speculative decoding, vLLM's names under the `speculab:` prefix.

Read from the speculator's totals at scrape time (the engine thread owns them; reading ints is safe).
A draft is one verification step of one request that proposed at least one token. Beyond vLLM's set, two
counters show speculation adapting to load: decode steps by the number of speculative tokens chosen for them
(`k="0"` = speculation skipped), and skipped steps by reason (`batch_size`: disable_by_batch_size; `adaptive`:
the adaptive policy chose k = 0). The gauge `spec_decode_forced_acceptance` says whether the counters count forced
accept decisions (1: `--forced-acceptance-rates`, a cost probe; 0: the target's exact verification).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from speculab.engine.speculative.speculator import SpecCounters

PREFIX = "speculab:"


class SpecDecodeCollector(Collector):
    """`speculab:spec_decode_*_total`, labelled with the served model name like the engine's other metrics."""

    def __init__(self, counters: SpecCounters, model_name: str, *, forced: bool = False):
        self.counters = counters
        self.model_name = model_name
        self.forced = forced  # the speculator's accept decisions are forced (speculative/forced.py)

    def collect(self) -> Iterator[Metric]:
        c, name = self.counters, self.model_name

        def counter(suffix: str, doc: str, value: int) -> CounterMetricFamily:
            m = CounterMetricFamily(PREFIX + "spec_decode_" + suffix, doc, labels=["model_name"])
            m.add_metric([name], value)
            return m

        yield counter("num_drafts", "Verification steps of a request with at least one draft token.", c.num_drafts)
        yield counter("num_draft_tokens", "Draft tokens proposed and verified.", c.num_draft_tokens)
        yield counter(
            "num_accepted_tokens", "Draft tokens accepted (the target's own token not counted).", c.num_accepted_tokens
        )
        per_pos = CounterMetricFamily(
            PREFIX + "spec_decode_num_accepted_tokens_per_pos",
            "Drafts whose token at this 0-based position was accepted.",
            labels=["model_name", "position"],
        )
        for pos, value in enumerate(list(c.accepted_per_pos)):
            per_pos.add_metric([name, str(pos)], value)
        yield per_pos
        steps = CounterMetricFamily(
            PREFIX + "spec_decode_num_steps",
            "Decode steps by the number of speculative tokens chosen for them (k=0: speculation skipped).",
            labels=["model_name", "k"],
        )
        for k, value in enumerate(list(c.steps_by_k)):
            steps.add_metric([name, str(k)], value)
        yield steps
        skipped = CounterMetricFamily(
            PREFIX + "spec_decode_num_skipped_steps",
            "Decode steps without speculation, by reason (batch_size: disable_by_batch_size; adaptive: k chose 0).",
            labels=["model_name", "reason"],
        )
        skipped.add_metric([name, "batch_size"], c.skipped_by_batch_size)
        skipped.add_metric([name, "adaptive"], c.skipped_by_adaptive)
        yield skipped
        forced = GaugeMetricFamily(
            PREFIX + "spec_decode_forced_acceptance",
            "1: drafts are accepted by a seeded draw to --forced-acceptance-rates (a cost probe, output not the "
            "target's distribution); 0: by exact verification.",
            labels=["model_name"],
        )
        forced.add_metric([name], 1.0 if self.forced else 0.0)
        yield forced
