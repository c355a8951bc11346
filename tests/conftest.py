"""Shared fixtures. Engine fixtures skip cleanly where torch (the [engine] extra) is not installed."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama-architecture checkpoint directory (random weights, real byte-level BPE tokenizer, chat template)."""
    pytest.importorskip("torch")
    from tests.fakes.tiny_checkpoint import make_tiny_checkpoint

    return make_tiny_checkpoint(tmp_path_factory.mktemp("tiny-llama"))
