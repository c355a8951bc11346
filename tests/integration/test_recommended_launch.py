"""The recommended flags launch the engine they are written for (issue 28): `speculab serve demo` with its
load-dependent form (`disable_by_batch_size`, for off-above and per-load alike) answers a completion; vLLM (CPU
venv, skipped when absent) starts with the batch-size schedule and answers. The flags are recommend_config's, from a
recommendation view shaped as `speculab run` builds it. That `speculab run` writes recommended.yaml and
recommended-flags.txt, and that the run accepts the file, is test_recommend_demo's (it runs both, on the demo
engine)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from fakes.vllm_cpu import VENV, launch_env
from speculab.commands.run.recommended import recommend_config, speculative_config
from speculab.config import parse_experiment
from speculab.harness.servers.process import free_port
from speculab.harness.verdict.model import BASELINE_CHOICE, LoadChoice, RecommendationBand, RecommendationView

SRC = str(Path(__file__).resolve().parents[2] / "src")

# the installed release from its distribution's metadata, as `speculab methods` reads it (harness.servers.methods
# .probe): importing vLLM to ask its __version__ takes seconds
INSTALLED_VLLM = """
import importlib.metadata as md
for dist in ("vllm", "vllm-cpu"):
    try:
        print(md.version(dist))
        break
    except md.PackageNotFoundError:
        pass
"""

EXP = parse_experiment("""
workload: {spec: builtin:grounded, num_prompts: 4}
loads:
  low: {concurrency: 1}
  operating: {concurrency: 16}
  sweep: [{concurrency: 1}, {concurrency: 4}, {concurrency: 16}]
baseline: {launch: {engine: speculab, command: [speculab, serve, demo], port: 8000}}
speculation:
  - {method: ngram, num_speculative_tokens: 2}
  - {method: ngram, num_speculative_tokens: 4}
""")


def view(form: str, bands: Sequence[tuple[str, tuple[float, ...], float | None]]) -> RecommendationView:
    bs = tuple(RecommendationBand(c, c, None, None, lo, tuple(f"c{v:g}" for v in lo), e) for c, lo, e in bands)
    loads = tuple(LoadChoice("", "", v, b.choice, "faster", 1.0, 1.0, 1.0) for b in bs for v in b.loads)
    winner = bs[0].choice if form == "off-above" else None
    return RecommendationView("concurrency", 0.03, loads, bs, form, winner, bs[0].upper_edge)


OFF_ABOVE = view("off-above", [("ngram-k4", (1, 4), 9.5), (BASELINE_CHOICE, (16,), None)])
PER_LOAD = view("per-load", [("ngram-k4", (1,), None), ("ngram-k2", (4,), None), (BASELINE_CHOICE, (16,), None)])


@contextlib.contextmanager
def serving(cmd: list[str], port: int, env: dict[str, str], timeout_s: float) -> Iterator[str]:
    proc = subprocess.Popen(
        cmd, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            assert proc.poll() is None, f"server exited ({proc.returncode}): {proc.stderr.read()[-2000:]}"  # type: ignore[union-attr]
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "server not ready in time"
            time.sleep(1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def complete(url: str) -> dict:
    body = json.dumps({"prompt": "one two three one two three one two", "max_tokens": 8, "temperature": 0})
    models = json.load(urllib.request.urlopen(url + "/v1/models", timeout=30))
    req = urllib.request.Request(
        url + "/v1/completions",
        data=json.dumps({**json.loads(body), "model": models["data"][0]["id"]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    return json.load(urllib.request.urlopen(req, timeout=120))


@pytest.mark.slow
def test_speculab_serve_accepts_the_recommended_flags() -> None:
    pytest.importorskip("torch")
    # a per-load k and off-above are spelt alike on this engine (drafts off above the lowest band's edge)
    assert speculative_config(recommend_config(PER_LOAD, EXP, "speculab")) == {
        "method": "ngram", "num_speculative_tokens": 4, "disable_by_batch_size": 1}  # fmt: skip
    chosen = recommend_config(OFF_ABOVE, EXP, "speculab")
    cfg = speculative_config(chosen)
    assert cfg is not None and cfg["disable_by_batch_size"] == 9
    port = free_port()
    cmd = [sys.executable, "-m", "speculab", "serve", "demo", "--port", str(port), "--threads", "1", *chosen.flags]
    with serving(cmd, port, {"PYTHONPATH": SRC}, 180) as url:
        out = complete(url)
    assert out["choices"][0]["text"] and out["usage"]["completion_tokens"] >= 1


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.timeout(900)  # vLLM on the CPU in the suite's background, as test_vllm_ab's
def test_vllm_starts_with_the_recommended_batch_size_schedule(tmp_path: Path) -> None:
    from tests.fakes.tiny_checkpoint import make_tiny_checkpoint

    python = VENV / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"no vllm-cpu virtual environment at {VENV}; create it with scripts/install_vllm_cpu.sh")
    version = subprocess.run([str(python), "-c", INSTALLED_VLLM], capture_output=True, text=True,
                             check=True).stdout.strip()  # fmt: skip
    chosen = recommend_config(PER_LOAD, EXP, "vllm", version)
    assert chosen.form == "batch-size schedule", chosen.notes
    model = make_tiny_checkpoint(tmp_path / "tiny-llama", hidden=128, heads=4, kv_heads=2, max_position_embeddings=2048)
    port = free_port()
    cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--enforce-eager", "--dtype", "float32", "--max-model-len", "1024",
           "--max-num-seqs", "16", *chosen.flags]  # fmt: skip
    env = launch_env(tmp_path)
    with serving(cmd, port, env, 400) as url:
        out = complete(url)
    assert out["usage"]["completion_tokens"] >= 1
