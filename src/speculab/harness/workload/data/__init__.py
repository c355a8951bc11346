"""The built-in workload sets as JSONL (original text, written by scripts/make_builtin_workloads.py); data only."""
