"""One metric compared between two arms at one load: the margin rule, paired per-prompt ratios, unpaired samples
and the record both build; pure numbers that know nothing of runs on disk, servers or the report."""
