"""`speculation.method` takes any name an engine accepts: passed through, checked at plan time against the engine's
own list (a one-line refusal naming the accepted ones, before anything is launched), warned as unchecked when the
engine cannot be read; today's five work as before, asking nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from speculab.config import SpeculationConfig, parse_experiment
from speculab.errors import UserError
from speculab.harness.experiment.plan import describe_plan, plan_experiment
from speculab.harness.servers.adapters import adapter_for, parse_command

VLLM_SOURCE = 'from typing import Literal\nSpeculativeMethod = Literal["ngram", "draft_model", "suffix", "mtp"]\n'


def exp_yaml(method: str, engine: str, command: list[str]) -> str:
    return f"""
workload: {{spec: "synthetic:input=10,output=8", num_prompts: 4}}
loads: {{operating: {{concurrency: 1}}}}
baseline:
  launch: {{engine: {engine}, command: {json.dumps(command)}, port: 8000}}
speculation: {{method: {method}, num_speculative_tokens: 3}}
"""


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch) -> list[str]:
    """A vLLM package declaring `suffix`, found by this interpreter (never imported: its __init__ would exit)."""
    pkg = tmp_path / "vllm" / "config"
    pkg.mkdir(parents=True)
    (tmp_path / "vllm" / "__init__.py").write_text("raise SystemExit('importing vllm is not allowed here')\n")
    (pkg / "__init__.py").write_text("")
    (pkg / "speculative.py").write_text(VLLM_SOURCE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--port", "8000"]


def test_a_method_outside_todays_five_loads():
    exp = parse_experiment(exp_yaml("suffix", "vllm", ["vllm", "serve", "/m"]))
    assert exp.speculation.method == "suffix"


def test_a_typo_of_one_of_ours_is_still_caught_at_load():
    with pytest.raises(UserError, match="did you mean `ngram`"):
        parse_experiment(exp_yaml("ngarm", "vllm", ["vllm", "serve", "/m"]))


def test_suffix_passes_for_a_vllm_that_declares_it_and_goes_through_to_the_flag(fake_vllm):
    plan = plan_experiment(parse_experiment(exp_yaml("suffix", "vllm", fake_vllm)))
    cand = plan.arms[1].launch.command
    assert json.loads(parse_command(cand).flags["--speculative-config"][0])["method"] == "suffix"
    assert plan.changes[0].verified is True and plan.notes == ()


def test_a_method_the_engine_does_not_declare_is_refused_naming_the_accepted_ones(monkeypatch):
    import speculab

    monkeypatch.setenv("PYTHONPATH", str(Path(speculab.__file__).parents[1]))  # this tree's speculab in the child
    command = [sys.executable, "-m", "speculab", "serve", "demo", "--port", "8000"]
    with pytest.raises(UserError) as e:
        plan_experiment(parse_experiment(exp_yaml("suffix", "speculab", command)))
    msg = str(e.value)
    assert "speculation.method suffix: speculab" in msg and "it accepts ngram, draft_model, eagle" in msg
    assert "\n" not in msg


def test_an_engine_that_cannot_be_read_is_warned_as_unchecked(tmp_path):
    command = [str(tmp_path / "no-such-llama-server"), "-m", "t.gguf", "--port", "8000"]
    plan = plan_experiment(parse_experiment(exp_yaml("ngram-map-k", "llamacpp", command)))
    assert plan.notes and "ngram-map-k is unchecked" in plan.notes[0]
    assert any(line.startswith("warning: speculation method ngram-map-k is unchecked") for line in describe_plan(plan))
    assert parse_command(plan.arms[1].launch.command).flags["--spec-type"] == ("ngram-map-k",)


def test_todays_five_ask_nothing(monkeypatch):
    import speculab.harness.servers.methods.here as here

    monkeypatch.setattr(here, "declared_by_command", lambda *a: pytest.fail("asked the engine for ngram"))
    plan = plan_experiment(parse_experiment(exp_yaml("ngram", "vllm", ["vllm", "serve", "/m", "--port", "8000"])))
    assert plan.notes == ()


def test_adapters_pass_an_engines_own_name_through():
    base = ["srv", "--port", "1"]
    sg = adapter_for("sglang").candidate_command(base, SpeculationConfig("NEXTN", 3))
    assert parse_command(sg).flags["--speculative-algorithm"] == ("NEXTN",)
    assert "--speculative-draft-model-path" not in parse_command(sg).flags
    lc = adapter_for("llamacpp").candidate_command(base, SpeculationConfig("draft-eagle3", 3, model="/h"))
    assert parse_command(lc).flags["--spec-type"] == ("draft-eagle3",)
    assert parse_command(lc).flags["--spec-draft-model"] == ("/h",)
    with pytest.raises(UserError, match="cannot run speculation method mtp"):
        adapter_for("llamacpp").candidate_command(base, SpeculationConfig("mtp", 3))  # one of ours it cannot derive


def test_two_url_mode_warns_that_the_method_is_unchecked():
    y = """
workload: "synthetic:input=10,output=8"
loads: {operating: {concurrency: 2}}
baseline: {url: "http://a:1"}
candidate: {url: "http://b:2"}
speculation: {method: suffix, num_speculative_tokens: 3}
"""
    plan = plan_experiment(parse_experiment(y))
    assert plan.notes == ("speculation method suffix is unchecked: in two-URL mode speculab launches no candidate",)


def test_local_model_needs_a_config_json(tmp_path):
    from speculab.harness.servers.methods.here import local_model

    (tmp_path / "empty").mkdir()
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    cards = [{"id": "served", "root": str(tmp_path / "empty")}, {"id": str(tmp_path / "ckpt")}]
    assert local_model(cards) == str(tmp_path / "ckpt")
    assert local_model([{"id": "Qwen/Qwen2.5-7B"}]) is None
