"""Pure analysis: per-request metrics, statistics, what-if and cost. No I/O, no printing, no plotting."""
