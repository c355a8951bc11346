"""Fixtures for speculative-decoding tests."""

from __future__ import annotations

import pytest
import torch
from tests.fakes.spec_models import tiny_lm

from speculab.engine.model import CausalLM


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models on a shared 2-core machine: intra-op threads only contend (measured 20x slower with 2)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def target_lm() -> CausalLM:
    return tiny_lm(0)
