"""Degeneration: does an output fall into a loop or repeat itself (`loops`, one output's text), and does a candidate do
so where the baseline does not (`paired`, per prompt)? Pure functions of output text; they know nothing of runs on
disk, servers or the report."""
