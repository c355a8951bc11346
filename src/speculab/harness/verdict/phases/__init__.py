"""A phased load (`loads: {phases: [...]}`) judged window by window: the schedule's windows as levels of the one
verdict (`windows`), and what the report shows of each phase (`views`, `records`). Knows nothing of rendering."""
