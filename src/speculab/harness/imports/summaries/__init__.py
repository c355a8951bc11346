"""Summary-only result files: what another tool's run file keeps when it keeps no request (its own medians, p99s,
throughput and counts), read as that run's aggregates for a comparison whose unit is the run; knows nothing of the
comparison, the verdict or the report."""
