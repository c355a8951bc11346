"""The A/B verdict: from an A/B run's saved inputs to the report model, every number and decision computed once.

Per arm and load (`arm_level`), per load and candidate (`comparison`: paired comparisons, gates), per request
(`per_request`), across loads (`across_loads`), several candidates (`ranking`), correctness, the looks of adaptive
repeats, assembled by `build.build_report` into `model.Report` (round-tripped by `codec`). Pure but for reading a
run directory; it never renders (`speculab.report` does) and never sends a request.
"""
