"""Workloads: where prompts come from (built-in sets, JSONL, ShareGPT, synthetic) and their correctness checks.

It knows nothing about endpoints, load or timing: a workload is a frozen tuple of `RequestSpec`s, the same in every
arm and every repeat. `load_workload` is the one entry point.
"""
