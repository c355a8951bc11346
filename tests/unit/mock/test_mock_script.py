"""The mock server's pure pieces: its config checks, output plan, chunking, text and prefix cache."""

from __future__ import annotations

import pytest

from speculab.mock.script import (
    VOCAB,
    MockConfig,
    PrefixCache,
    chunk_sizes,
    count_tokens,
    generate_tokens,
    plan_output,
    render_chat,
)


def test_plan_output_natural_length_stops():
    cfg = MockConfig(output_tokens=10)
    assert plan_output(cfg, prompt_tokens=5, max_tokens=None) == (10, "stop")
    assert plan_output(cfg, 5, max_tokens=100) == (10, "stop")


def test_plan_output_max_tokens_caps_with_length():
    cfg = MockConfig(output_tokens=10)
    assert plan_output(cfg, 5, max_tokens=4) == (4, "length")
    assert plan_output(cfg, 5, max_tokens=10) == (10, "length")  # the cap is reached before the mock's EOS


def test_plan_output_min_tokens_and_ignore_eos():
    cfg = MockConfig(output_tokens=10, max_model_len=100)
    assert plan_output(cfg, 5, max_tokens=50, min_tokens=20) == (20, "stop")
    assert plan_output(cfg, 5, max_tokens=50, ignore_eos=True) == (50, "length")
    assert plan_output(cfg, 5, max_tokens=None, ignore_eos=True) == (95, "length")  # up to the context


def test_chunk_sizes_cycle_the_pattern_and_cut_the_last():
    assert chunk_sizes((2,), 7) == [2, 2, 2, 1]
    assert chunk_sizes((3, 1, 2), 10) == [3, 1, 2, 3, 1]
    assert sum(chunk_sizes((4, 1), 1000)) == 1000


def test_text_is_deterministic_in_prompt_and_seed_only():
    a = generate_tokens("some prompt", None, 50)
    assert a == generate_tokens("some prompt", None, 50)
    assert a != generate_tokens("other prompt", None, 50)
    assert a != generate_tokens("some prompt", 7, 50)
    assert generate_tokens("some prompt", None, 20) == a[:20]  # a longer output extends a shorter one
    assert all(t.endswith(" ") and t[:-1] in VOCAB for t in a)
    assert count_tokens("".join(a)) == 50


def test_render_chat_adds_one_token_per_role():
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert render_chat(msgs) == "system: be brief\nuser: hi"
    assert count_tokens(render_chat(msgs)) == 5


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"tokens_per_chunk": 4, "num_speculative_tokens": 2}, "num_speculative_tokens >= 3"),
        ({"fault_drop_rate": 0.7, "fault_5xx_rate": 0.4}, "sum to <= 1"),
        ({"fault_stall_rate": -0.1}, "fault_stall_rate must be in [0, 1]"),
        ({"tokens_per_chunk": (2, 0)}, "tokens_per_chunk values must be >= 1"),
        ({"gap_s": -1}, "gap_s must be >= 0"),
        ({"models": ()}, "model name"),
    ],
)
def test_config_rejects_inconsistent_scripts(kwargs, needle):
    with pytest.raises(ValueError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        MockConfig(**kwargs)


def test_config_normalizes_models_and_pattern():
    cfg = MockConfig(models="m1", tokens_per_chunk=[3, 1, 2], num_speculative_tokens=3)
    assert cfg.models == ("m1",)
    assert cfg.chunk_pattern == (3, 1, 2) and cfg.mean_tokens_per_chunk == 2.0


def test_prefix_cache_hits_leading_blocks_only():
    cache = PrefixCache(block_tokens=4, max_blocks=100)
    shared = [f"w{i}" for i in range(12)]
    assert cache.lookup_and_insert([*shared, "a", "b"]) == 0  # cold
    assert cache.lookup_and_insert([*shared, "c", "d", "e"]) == 12  # three shared blocks
    assert cache.lookup_and_insert(["x", *shared]) == 0  # a different first block breaks the chain
    assert cache.lookup_and_insert(shared) == 11  # an exact repeat still computes its last token


def test_prefix_cache_evicts_least_recently_used():
    cache = PrefixCache(block_tokens=1, max_blocks=3)
    cache.lookup_and_insert(["a", "b", "c"])
    cache.lookup_and_insert(["x", "y"])  # evicts the chain a, b
    assert cache.lookup_and_insert(["a", "b", "c", "d"]) == 0
