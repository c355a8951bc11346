"""Pure analysis: the figures table (`figures`: every compared figure's one home), per-request metrics, paired and
unpaired comparisons (`comparison`), groups sent together, crossover, what-if and cost (the base statistics are
`harness.stats`, below). No I/O, no printing, no plotting."""
