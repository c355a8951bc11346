"""Fakes for engine tests: a tiny random model and a one-character-per-token detokenizer."""

from __future__ import annotations

import pytest
import torch

from speculab.engine.model import CausalLM, ModelConfig

VOCAB = 64


def tiny_model(seed: int = 0, max_pos: int = 256) -> CausalLM:
    cfg = ModelConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=max_pos,
    )
    torch.manual_seed(seed)
    model = CausalLM(cfg).eval()
    with torch.no_grad():  # sharper logits than the default init, so greedy runs are not flat
        model.lm_head.weight.mul_(8.0)
    return model


def char_of(token_id: int) -> str:
    return chr(ord("a") + token_id % 26)


class CharDetokenizer:
    """Token i renders as one letter; deliberately holds each token back by one push to mimic UTF-8 buffering."""

    def __init__(self, prompt_ids: list[int]):
        self.held = ""

    def push(self, ids: list[int]) -> str:
        text = self.held + "".join(char_of(i) for i in ids)
        self.held = text[-1:]
        return text[:-1]

    def flush(self) -> str:
        out, self.held = self.held, ""
        return out


def prompts(n: int, seed: int = 1, lo: int = 3, hi: int = 20) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi, (n,), generator=g).tolist()
    return [torch.randint(0, VOCAB, (k,), generator=g).tolist() for k in lengths]


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny models run fastest on one thread; on a loaded 2-core machine more threads spin against each other."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
