"""Result files other benchmark tools wrote, read into speculab's own records, one module per tool and format.

Only per-request fields are taken; every number the report shows is recomputed by speculab's analysis with speculab's
definitions, never copied from the tool's aggregates. This package reads files: it knows nothing of compare's
pairing, the verdict or the report.
"""
