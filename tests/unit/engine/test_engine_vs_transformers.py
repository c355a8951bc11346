"""Greedy decoding through the whole engine (batched, chunked prefill) equals transformers' generate."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from tests.fakes.engine_fakes import one_torch_thread  # noqa: F401, E402 (autouse fixture)

from speculab.engine.engine import Engine, EngineConfig  # noqa: E402
from speculab.engine.loader import load_model  # noqa: E402
from speculab.engine.sequence import SamplingParams  # noqa: E402
from speculab.engine.tokenizer import Tokenizer  # noqa: E402


def test_batched_engine_greedy_equals_transformers_generate(tiny_checkpoint):
    tok = Tokenizer.from_dir(tiny_checkpoint)
    texts = ["The quick brown fox", "def main():\n    return", "Hello", "A much longer prompt, " * 6]
    prompts = [tok.encode(t) for t in texts]
    n = 12
    model = load_model(tiny_checkpoint, dtype=torch.float32)
    # budget 24: the long prompt is prefilled in chunks while the others already decode
    engine = Engine(
        model,
        EngineConfig(max_num_seqs=4, max_model_len=256, max_num_batched_tokens=24),
        eos_token_ids=tok.eos_token_ids,
    )
    # min_tokens = max_tokens bans eos at every step, which is what min_new_tokens does in transformers
    seqs = engine.generate(prompts, SamplingParams(max_tokens=n, min_tokens=n, temperature=0.0))
    hf = transformers.AutoModelForCausalLM.from_pretrained(tiny_checkpoint, torch_dtype=torch.float32).eval()
    for p, s in zip(prompts, seqs, strict=True):
        out = hf.generate(
            torch.tensor([p]),
            max_new_tokens=n,
            min_new_tokens=n,
            do_sample=False,
            eos_token_id=sorted(tok.eos_token_ids),
            pad_token_id=0,
        )
        assert s.output_ids == out[0, len(p) :].tolist()
