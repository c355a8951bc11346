"""The EAGLE head's training (scripts/demo_eagle.py) computes what serving computes, pass for pass.

Pass 0 of the training forward (teacher forcing on the target's features) equals the head's serving forward over
a KV cache; pass 1 (training-time test) equals the head's second draft of a step, computed the way the proposer
computes it: target-feature entries in the cache, then one entry from the head's own prediction.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from tests.fakes.spec_models import random_eagle, tiny_lm

SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import demo_eagle  # noqa: E402
import demo_train  # noqa: E402

from speculab.engine.model import BatchInput, KVCache  # noqa: E402


@pytest.fixture(scope="module")
def pair():
    target = tiny_lm(0, num_hidden_layers=2)
    return target, random_eagle(target, 1, num_hidden_layers=2)


def _serve(head, target, tokens: list[int], feats: torch.Tensor, positions: list[int], cache: KVCache) -> torch.Tensor:
    batch = BatchInput(torch.tensor([tokens]), torch.tensor([positions]), torch.tensor([0]), max(positions) + 1)
    with torch.no_grad():
        return head(target.model.embed_tokens(batch.tokens), feats[None], batch, cache)[0]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal up to float32 rounding at the features' own scale (|f| reaches ~80 here; the passes and the serving path
    multiply in different shapes, so the kernels sum in different orders: 1e-4 apart on some CPUs). A wrong mask,
    position or feature differs by whole units."""
    return torch.allclose(a, b, rtol=0, atol=1e-5 * max(1.0, float(b.abs().max())))


def test_training_passes_equal_the_serving_forward_and_the_second_draft(pair):
    target, head = pair
    g = torch.Generator().manual_seed(0)
    window = torch.randint(0, target.config.vocab_size, (1, 25), generator=g)  # t_0 .. t_24
    with torch.no_grad():
        h = demo_train.train_hidden(target, window)[0]  # [25, H]: h_0 .. h_24
        passes = demo_eagle.head_train_forward(head, target, window[:, 1:], h[None, :-1], depth=3)
    tokens = window[0].tolist()
    # pass 0 at every position = the serving forward over entries (t_{i+1}, h_i), i = 0 .. 23
    cache = KVCache(head.config, 1, 64, torch.float32, torch.device("cpu"))
    served = _serve(head, target, tokens[1:], h[:-1], list(range(24)), cache)
    assert _same(passes[0][0], served)
    for n in (1, 7, 20):  # a step whose target features end at n (entries 0 .. n-1 are the target's)
        cache = KVCache(head.config, 1, 64, torch.float32, torch.device("cpu"))
        f = _serve(head, target, tokens[1 : n + 1], h[:n], list(range(n)), cache)[-1]  # f_n
        f1 = _serve(head, target, [tokens[n + 1]], f[None], [n], cache)[0]  # the second draft's entry at n
        assert _same(passes[1][0, n], f1)
        f2 = _serve(head, target, [tokens[n + 2]], f1[None], [n + 1], cache)[0]  # the third draft's
        assert _same(passes[2][0, n + 1], f2)


def test_losses_fall_when_training_a_toy_head():
    target = tiny_lm(0, num_hidden_layers=2)
    head = demo_eagle.new_head(target, seed=0)
    stream = torch.randint(0, target.config.vocab_size, (4000,), generator=torch.Generator().manual_seed(3))
    stream = torch.cat([stream[:200]] * 20)  # repetitive text: learnable in a few steps
    cfg = demo_train.TrainConfig(batch_size=4, seq_len=32, budget_s=60, max_steps=30, peak_lr=1e-2, warmup_steps=3,
                                 log_every_s=0, eval_every_s=1e9, eval_windows=4)  # fmt: skip
    res = demo_eagle.train_eagle(head, target, stream, stream[:400], cfg, demo_eagle.EagleLoss(), torch.device("cpu"),
                                 log=lambda _: None)  # fmt: skip
    assert res.steps == 30
    assert res.log[-1]["token_loss"] < res.log[0]["token_loss"] - 0.1  # a random target: a high entropy floor
    assert res.log[-1]["agreement"] > res.log[0]["agreement"]
