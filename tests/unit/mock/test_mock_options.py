"""`speculab mock-server`'s flags -> `MockConfig`: the step-batched mode's flags, forced acceptance given directly or
through vLLM's `--speculative-config`, and a bad value as one line."""

from __future__ import annotations

import json

import pytest

from speculab.errors import UserError
from speculab.mock.options import MockFlags, mock_config_from_flags

STEPS = {"step_batched": True, "step_ms": 8.0, "step_ms_per_request": 1.0, "verify_ms_per_request_token": 0.5,
         "draft_ms_per_token": 0.25}  # fmt: skip


def _vllm(**config: object) -> str:
    return json.dumps({"method": "ngram", **config})


def test_step_flags_in_milliseconds_become_the_config_in_seconds() -> None:
    cfg = mock_config_from_flags(MockFlags(**STEPS, acceptance_rates="0.8,0.7,0.6", num_speculative_tokens=2))
    assert cfg.step_batched and (cfg.step_s, cfg.step_s_per_request) == pytest.approx((0.008, 0.001))
    assert (cfg.verify_s_per_request_token, cfg.draft_s_per_token) == pytest.approx((0.0005, 0.00025))
    assert cfg.acceptance_rates == (0.8, 0.7, 0.6) and cfg.num_speculative_tokens == 2
    assert cfg.forced_acceptance_rates is None
    assert mock_config_from_flags(MockFlags(**STEPS, acceptance_rates="0.8")).num_speculative_tokens == 0  # plain arm


def test_forced_rates_set_k_unless_it_is_given() -> None:
    cfg = mock_config_from_flags(MockFlags(**STEPS, forced_acceptance_rates="0.8,0.6"))
    assert cfg.forced_acceptance_rates == (0.8, 0.6) and cfg.num_speculative_tokens == 2
    wider = mock_config_from_flags(MockFlags(**STEPS, forced_acceptance_rates="0.8,0.6", num_speculative_tokens=4))
    assert wider.num_speculative_tokens == 4  # the positions not given accept nothing


def test_vllm_synthetic_speculative_config_is_forced_acceptance() -> None:
    k4 = {"num_speculative_tokens": 4, "rejection_sample_method": "synthetic"}
    by_rates = mock_config_from_flags(MockFlags(**STEPS, speculative_config=_vllm(
        **k4, synthetic_acceptance_rates=[0.9, 0.7, 0.5, 0.3])))  # fmt: skip
    assert by_rates.num_speculative_tokens == 4 and by_rates.forced_acceptance_rates == (0.9, 0.7, 0.5, 0.3)
    # vLLM's minimum-variance schedule: 2.5 accepted drafts are two certain ones and a half
    by_length = mock_config_from_flags(MockFlags(**STEPS, speculative_config=_vllm(
        **k4, synthetic_acceptance_length=3.5)))  # fmt: skip
    assert by_length.forced_acceptance_rates == (1.0, 1.0, 0.5, 0.0)
    plain = mock_config_from_flags(MockFlags(**STEPS, speculative_config=_vllm(num_speculative_tokens=3),
                                             acceptance_rates="0.9,0.8,0.7"))  # fmt: skip
    assert plain.num_speculative_tokens == 3 and plain.forced_acceptance_rates is None  # measured acceptance


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        ({"acceptance_rates": "0.8,high"}, "--acceptance-rates takes one rate per draft position"),
        ({"forced_acceptance_rates": "0.6,0.8"}, "forced_acceptance_rates must be non-increasing"),
        ({"forced_acceptance_rates": "0.8", "speculative_config": _vllm(num_speculative_tokens=1,
          rejection_sample_method="synthetic", synthetic_acceptance_length=1.5)}, "forced acceptance is given twice"),
        ({"speculative_config": _vllm(num_speculative_tokens=2, rejection_sample_method="synthetic")},
         "exactly one of synthetic_acceptance_rates or synthetic_acceptance_length"),
        ({"speculative_config": _vllm(num_speculative_tokens=2, rejection_sample_method="synthetic",
          synthetic_acceptance_length=4.0)}, "synthetic_acceptance_length must be a number in [1, 3]"),
        ({"step_batched": False, "forced_acceptance_rates": "0.8"}, "set step_batched (--step-batched) too"),
        ({"num_speculative_tokens": 3, "acceptance_rates": "0.9"}, "has 1 rates for num_speculative_tokens = 3"),
    ],
)  # fmt: skip
def test_each_bad_step_flag_is_one_line_naming_the_fix(flags: dict[str, object], needle: str) -> None:
    with pytest.raises(UserError) as e:
        mock_config_from_flags(MockFlags(**{**STEPS, **flags}))  # type: ignore[arg-type]
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_loop_flags_script_a_degenerating_candidate() -> None:
    cfg = mock_config_from_flags(MockFlags(loop_after_tokens=32, loop_period=4))
    assert (cfg.loop_after_tokens, cfg.loop_period) == (32, 4)
    assert mock_config_from_flags(MockFlags()).loop_after_tokens is None
    with pytest.raises(UserError, match=r"^invalid mock-server settings: loop_period: set loop_after_tokens"):
        mock_config_from_flags(MockFlags(loop_period=4))


def test_a_streaming_defect_is_a_flag_and_a_negative_count_one_line() -> None:
    assert mock_config_from_flags(MockFlags(stream_drop_last_tokens=2)).stream_drop_last_tokens == 2
    with pytest.raises(UserError, match="stream_drop_last_tokens must be >= 0"):
        mock_config_from_flags(MockFlags(stream_drop_last_tokens=-1))
