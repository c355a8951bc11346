"""Readers of the aggregate files benchmark suites publish (InferenceX, draftbench, SpecForge's bench_model_speedup,
TensorRT-LLM's trtllm-bench): each a summary reader (`TOOL`, `detect`, `read`) whose runs are `RunSummary`s, with
the acceptance a file states and, where a file holds several configurations, each run's row; knows nothing of the
comparison, the verdict or the report."""
