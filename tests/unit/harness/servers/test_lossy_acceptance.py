"""Lossy acceptance modes (issue 50 item 3.4), each read where its engine's adapter says: vLLM's typical acceptance
(`--speculative-config acceptance_method`, the older `--spec-decoding-acceptance-method`), SGLang's acceptance
thresholds below 1, TensorRT-LLM's relaxed acceptance for thinking in the options file; a planned candidate records
what made it lossy, and an exact one records nothing (its inputs.json shape unchanged)."""

from __future__ import annotations

import json

import pytest
import yaml

from speculab.commands.run.plan import plan_experiment
from speculab.config import parse_experiment
from speculab.harness.design import ArmInfo
from speculab.harness.servers.adapters import lossy_by_launch

VLLM = ["vllm", "serve", "/m", "--port", "8000"]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--speculative-config", '{"method": "ngram", "acceptance_method": "typical_acceptance_sampler"}'],
         ("--speculative-config acceptance_method=typical_acceptance_sampler",)),
        (['--speculative-config={"acceptance_method": "typical_acceptance_sampler"}'],
         ("--speculative-config acceptance_method=typical_acceptance_sampler",)),
        (["--spec-decoding-acceptance-method", "typical_acceptance_sampler"],
         ("--spec-decoding-acceptance-method typical_acceptance_sampler",)),
        (["--speculative-config", '{"method": "ngram", "acceptance_method": "rejection_sampler"}'], ()),
        (["--speculative-accept-threshold-acc", "0.5"], ("--speculative-accept-threshold-acc 0.5",)),
        (["--speculative_accept_threshold_single=0.9"], ("--speculative_accept_threshold_single 0.9",)),
        (["--speculative-accept-threshold-acc", "1.0"], ()),  # SGLang's default: exact
        (["--speculative-accept-threshold-acc", "lots"], ()),  # not a number: SGLang refuses it, nothing runs
        ([], ()),
    ],
)  # fmt: skip
def test_each_engines_lossy_knob_is_read_in_its_words(extra: list[str], said: tuple[str, ...]) -> None:
    assert lossy_by_launch([*VLLM, *extra]) == said


def test_tensorrt_llms_relaxed_acceptance_is_read_from_the_options_file(tmp_path) -> None:
    relaxed = tmp_path / "relaxed.yaml"
    spec = {"decoding_type": "MTP", "num_nextn_predict_layers": 3}
    relaxed.write_text(yaml.safe_dump({"speculative_config": {**spec, "use_relaxed_acceptance_for_thinking": True}}))
    exact = tmp_path / "exact.yaml"
    exact.write_text(yaml.safe_dump({"speculative_config": spec}))
    serve = ["trtllm-serve", "/m", "--extra_llm_api_options"]
    assert lossy_by_launch([*serve, str(relaxed)]) == ("speculative_config.use_relaxed_acceptance_for_thinking: true",)
    assert lossy_by_launch([*serve, str(exact)]) == ()
    assert lossy_by_launch([*serve, str(tmp_path / "missing.yaml")]) == ()  # the engine would not start on it


def _experiment(options: dict[str, object]) -> str:
    return f"""
workload: {{spec: "synthetic:input=10,output=8", num_prompts: 4}}
loads: {{operating: {{concurrency: 1}}}}
baseline: {{launch: {{engine: vllm, command: {json.dumps(VLLM)}, port: 8000}}}}
speculation: {{method: draft_model, model: /d, num_speculative_tokens: 3, options: {json.dumps(options)}}}
"""


def test_a_planned_candidate_records_what_makes_it_lossy_and_an_exact_one_nothing() -> None:
    lossy = plan_experiment(parse_experiment(_experiment({"acceptance_method": "typical_acceptance_sampler"})))
    info = lossy.arms[1].info
    assert info.lossy_acceptance == ("--speculative-config acceptance_method=typical_acceptance_sampler",)
    assert ArmInfo.from_dict(info.to_dict()) == info
    exact = plan_experiment(parse_experiment(_experiment({}))).arms[1].info
    assert exact.lossy_acceptance == () and "lossy_acceptance" not in exact.to_dict()
