"""Result files other benchmark tools wrote (and `speculab bench` directories), read into speculab's own records:
one reader module per format, and the registry of them (`registry`: detection order, `--format` names).

Only per-request fields are taken; every number the report shows is recomputed by speculab's analysis with speculab's
definitions, never copied from the tool's aggregates. This package reads files: it knows nothing of compare's
pairing, the verdict or the report.
"""
