"""--speculative-config parsing: vLLM-style keys, defaults, and one clear error per mistake."""

from __future__ import annotations

import pytest

from speculab.engine.speculative.config import SpecConfig, SpecConfigError, parse_spec_config
from speculab.errors import UserError


def test_ngram_config_as_documented():
    cfg = parse_spec_config('{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":2}')
    assert cfg == SpecConfig("ngram", 4, prompt_lookup_max=4, prompt_lookup_min=2)
    assert parse_spec_config(cfg.to_json()) == cfg


def test_draft_model_config_as_documented():
    cfg = parse_spec_config('{"method":"draft_model","model":"demo-draft","num_speculative_tokens":4}')
    assert cfg == SpecConfig("draft_model", 4, model="demo-draft")
    assert parse_spec_config(cfg.to_json()) == cfg
    # vLLM infers a draft model from "model" alone
    assert parse_spec_config({"model": "/m", "num_speculative_tokens": 2}).method == "draft_model"


def test_eagle_and_adaptive_configs_as_documented():
    cfg = parse_spec_config('{"method":"eagle","model":"demo-eagle","num_speculative_tokens":4}')
    assert cfg == SpecConfig("eagle", 4, model="demo-eagle")
    adaptive = parse_spec_config(
        {
            "method": "eagle",
            "model": "demo-eagle",
            "num_speculative_tokens": 4,
            "adaptive": True,
            "disable_by_batch_size": 8,
        }
    )
    assert adaptive == SpecConfig("eagle", 4, model="demo-eagle", adaptive=True, disable_by_batch_size=8)
    for c in (cfg, adaptive, parse_spec_config({"method": "ngram", "num_speculative_tokens": 2, "adaptive": True})):
        assert parse_spec_config(c.to_json()) == c


def test_ngram_lookup_defaults():
    cfg = parse_spec_config({"method": "ngram", "num_speculative_tokens": 3})
    assert (cfg.prompt_lookup_max, cfg.prompt_lookup_min) == (4, 1)
    assert (
        parse_spec_config({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 6}).prompt_lookup_max
        == 6
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"num_speculative_tokens": 4}', "missing key method"),
        ('{"method": "medusa", "num_speculative_tokens": 4}', 'method "medusa" is not supported'),
        (
            '{"method": "eagle", "num_speculative_tokens": 4}',
            "method eagle needs key model (a model directory, or demo-eagle)",
        ),
        (
            '{"method": "eagle", "model": "m", "num_speculative_tokens": 4, "prompt_lookup_min": 2}',
            "unknown key prompt_lookup_min",
        ),
        (
            '{"method": "ngram", "num_speculative_tokens": 4, "disable_by_batch_size": 0}',
            "disable_by_batch_size must be between 1",
        ),
        ('{"method": "ngram", "num_speculative_tokens": 4, "adaptive": "yes"}', "adaptive must be true or false"),
        ('{"method": "ngram"}', "missing key num_speculative_tokens"),
        ('{"method": "ngram", "num_speculative_tokens": 0}', "num_speculative_tokens must be between 1 and 32"),
        ('{"method": "ngram", "num_speculative_tokens": "4"}', "num_speculative_tokens must be an integer"),
        ('{"method": "ngram", "num_speculative_tokens": true}', "num_speculative_tokens must be an integer"),
        (
            '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 1, "prompt_lookup_min": 2}',
            "prompt_lookup_min (2) must not exceed prompt_lookup_max (1)",
        ),
        ('{"method": "ngram", "num_speculative_tokens": 4, "model": "x"}', "unknown key model for method ngram"),
        ('{"method": "draft_model", "num_speculative_tokens": 4}', "needs key model"),
        ('{"method": "draft_model", "model": "", "num_speculative_tokens": 4}', "needs key model"),
        (
            '{"method": "draft_model", "model": "m", "num_speculative_tokens": 4, "prompt_lookup_max": 3}',
            "unknown key prompt_lookup_max for method draft_model",
        ),
    ],
)
def test_invalid_configs_name_the_key(text, message):
    with pytest.raises(SpecConfigError, match=None) as info:
        parse_spec_config(text)
    assert message in str(info.value)
    assert isinstance(info.value, UserError)
