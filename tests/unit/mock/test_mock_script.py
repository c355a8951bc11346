"""The mock server's pure pieces: its config checks, output plan, chunking, text, prefix cache, and the step-batched
mode's cost and acceptance rules."""

from __future__ import annotations

import random
import re

import pytest

from speculab.mock.script import (
    VOCAB,
    MockConfig,
    PrefixCache,
    chunk_sizes,
    conditional_acceptance,
    count_tokens,
    draw_accepted,
    generate_tokens,
    plan_output,
    render_chat,
    scripted_tokens,
    step_s,
    streamed_tokens,
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


# --------------------------------------------------------------------------------------------------------------
# The step-batched mode's keys and rules (issue 49)

STEP = {"step_batched": True}


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"step_s_per_request": 0.001}, "step_s_per_request: step-batched settings; set step_batched"),
        ({"forced_acceptance_rates": (0.5,)}, "forced_acceptance_rates: step-batched settings"),
        ({**STEP, "step_s": -0.01}, "step_s must be >= 0"),
        ({**STEP, "verify_s_per_request_token": -1}, "verify_s_per_request_token must be >= 0"),
        ({**STEP, "step_s": 0.0}, "step_s or step_s_per_request must be > 0"),
        ({**STEP, "acceptance_rates": (0.5, 1.5)}, "acceptance_rates must each be in [0, 1]"),
        (
            {**STEP, "num_speculative_tokens": 3, "acceptance_rates": (0.9, 0.8)},
            "has 2 rates for num_speculative_tokens = 3",
        ),
        ({**STEP, "forced_acceptance_rates": (0.8,)}, "forced_acceptance_rates needs num_speculative_tokens > 0"),
        (
            {**STEP, "num_speculative_tokens": 1, "forced_acceptance_rates": (0.8, 0.6)},
            "more than num_speculative_tokens (1)",
        ),
        ({**STEP, "num_speculative_tokens": 2, "forced_acceptance_rates": (0.6, 0.8)}, "must be non-increasing"),
        ({**STEP, "tokens_per_chunk": 2, "num_speculative_tokens": 1}, "tokens_per_chunk must be 1"),
        ({**STEP, "decode_slowdown_per_request": 0.1}, "use step_s_per_request"),
    ],
)
def test_config_rejects_each_wrong_step_setting_in_one_line(kwargs, needle):
    with pytest.raises(ValueError, match=re.escape(needle)) as e:
        MockConfig(**kwargs)
    assert "\n" not in str(e.value)


def test_step_time_grows_with_batch_and_with_batch_times_k():
    plain = MockConfig(**STEP, step_s=0.01, step_s_per_request=0.001, verify_s_per_request_token=0.0005,
                       draft_s_per_token=0.002)  # fmt: skip
    assert step_s(plain, 4) == pytest.approx(0.014)  # k = 0: a + b c only
    assert step_s(plain, 0) == step_s(plain, 1)  # an empty batch is never stepped; a step holds one request at least
    spec = MockConfig(**STEP, step_s=0.01, step_s_per_request=0.001, verify_s_per_request_token=0.0005,
                      draft_s_per_token=0.002, num_speculative_tokens=3, acceptance_rates=(0.5,) * 3)  # fmt: skip
    assert step_s(spec, 4) == pytest.approx(0.010 + 0.004 + 0.0005 * 4 * 3 + 0.002 * 3)


def test_forced_rates_become_conditional_as_vllm_turns_them():
    forced = MockConfig(**STEP, num_speculative_tokens=4, forced_acceptance_rates=(0.8, 0.6, 0.0))
    assert conditional_acceptance(forced) == pytest.approx((0.8, 0.75, 0.0, 0.0))  # p_j / p_(j-1); missing: 0
    content = MockConfig(**STEP, num_speculative_tokens=2, acceptance_rates=(0.9, 0.5, 0.1))
    assert conditional_acceptance(content) == (0.9, 0.5)  # the first k of the content's rates


class ScriptedRng:
    """A random.Random stand-in that returns the given uniforms in order."""

    def __init__(self, *values: float):
        self.values = list(values)

    def random(self) -> float:
        return self.values.pop(0)


def test_acceptance_is_drawn_position_by_position_up_to_the_first_rejection():
    rates = (0.8, 0.5, 0.5)
    assert draw_accepted(rates, ScriptedRng(0.1, 0.4, 0.2)) == 3  # type: ignore[arg-type]
    rng = ScriptedRng(0.1, 0.6, 0.0)  # the second position is rejected: the third is never drawn
    assert draw_accepted(rates, rng) == 1 and rng.values == [0.0]  # type: ignore[arg-type]
    assert draw_accepted(rates, ScriptedRng(0.8)) == 0  # type: ignore[arg-type]  # u < rate accepts
    # seeded draws follow the rates: P(at least j+1 accepted) = 0.8, 0.4, 0.2
    rng2 = random.Random(7)
    n, draws = 20000, [draw_accepted(rates, rng2) for _ in range(20000)]
    at_least = [sum(d > j for d in draws) / n for j in range(3)]
    assert at_least == pytest.approx([0.8, 0.4, 0.2], abs=0.015)


def test_a_looping_script_repeats_its_period_after_n_tokens_and_agrees_with_the_plain_one_before():
    """`loop_after_tokens` (issue 50): the candidate's text is the baseline's up to token N + P, then the P tokens after
    the first N again and again; deterministic per prompt and seed, so a baseline mock's outputs stay clean."""
    plain, looping = MockConfig(), MockConfig(loop_after_tokens=32, loop_period=8)
    base = scripted_tokens(plain, "some prompt", 7, 128)
    assert base == generate_tokens("some prompt", 7, 128)
    out = scripted_tokens(looping, "some prompt", 7, 128)
    assert out[:40] == base[:40] and out[40:] != base[40:]
    assert all(out[i] == out[i - 8] for i in range(40, 128))
    assert len(set(out[32:40])) > 1  # a period of 8, not of 1
    assert out == scripted_tokens(looping, "some prompt", 7, 128)
    assert scripted_tokens(looping, "some prompt", 7, 30) == base[:30]  # shorter than N: no loop
    assert scripted_tokens(looping, "some prompt", 7, 36) == base[:36]  # inside the first cycle: still the same
    first = generate_tokens("p", None, 1)
    assert scripted_tokens(MockConfig(loop_after_tokens=0, loop_period=1), "p", None, 5) == first * 5


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"loop_period": 4}, "loop_period: set loop_after_tokens (--loop-after-tokens) too"),
        ({"loop_after_tokens": -1}, "loop_after_tokens must be >= 0"),
        ({"loop_after_tokens": 8, "loop_period": 0}, "loop_period must be >= 1"),
    ],
)
def test_bad_loop_settings_name_the_key(kwargs, needle):
    with pytest.raises(ValueError, match=re.escape(needle)):
        MockConfig(**kwargs)


def test_a_stream_that_drops_its_last_tokens_keeps_its_chunks_and_blanks_their_text():
    tokens = ["a ", "b ", "c ", "d "]
    assert streamed_tokens(tokens, 0) == tokens
    assert streamed_tokens(tokens, 2) == ["a ", "b ", "", ""]
    assert streamed_tokens(tokens, 9) == ["", "", "", ""]  # more than it has: nothing streamed
    with pytest.raises(ValueError, match="stream_drop_last_tokens"):
        MockConfig(stream_drop_last_tokens=-1)
