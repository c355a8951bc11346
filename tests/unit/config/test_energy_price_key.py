"""`cost: usd_per_kwh` (issue 40): the electricity price that turns energy per output token into dollars."""

from __future__ import annotations

import pytest

from speculab.config import parse_experiment
from speculab.errors import UserError

FILE = """
workload: builtin:open
loads: {operating: {concurrency: 8}}
baseline: {launch: {engine: speculab, command: [speculab, serve, demo], port: 8123}}
speculation: {method: ngram, num_speculative_tokens: 3}
cost: {baseline: {usd_per_hour: 2.5}, usd_per_kwh: PRICE}
"""


def test_the_price_per_kwh_is_read():
    e = parse_experiment(FILE.replace("PRICE", "0.12"))
    assert e.cost is not None and e.cost.usd_per_kwh == 0.12
    assert parse_experiment(FILE.replace(", usd_per_kwh: PRICE", "")).cost.usd_per_kwh is None


def test_a_negative_price_is_one_line_with_its_key():
    with pytest.raises(UserError) as ei:
        parse_experiment(FILE.replace("PRICE", "-1"), "experiment.yaml")
    assert "cost.usd_per_kwh: must be >= 0" in str(ei.value) and "\n" not in str(ei.value)
