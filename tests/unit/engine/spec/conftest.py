"""Fixtures for speculative-decoding tests."""

from __future__ import annotations

import pytest
from tests.fakes.spec_models import tiny_lm

from speculab.engine.model import CausalLM


@pytest.fixture(scope="session")
def target_lm() -> CausalLM:
    return tiny_lm(0)
