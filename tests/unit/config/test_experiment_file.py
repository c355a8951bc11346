"""The experiment file: a full valid file, defaults, and one clear line per mistake."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from speculab.config import LoadLevel, load_experiment, parse_experiment
from speculab.errors import UserError

FULL = """
name: ngram on my endpoint
workload:
  spec: builtin:grounded
  num_prompts: 120
  api: chat
sampling: {temperature: 0.0, top_p: 1.0, top_k: -1, seed: 7, max_tokens: 128, min_tokens: 128, ignore_eos: true}
loads:
  low: {concurrency: 1}
  operating: {rate: 4.0, arrival: gamma, burstiness: 0.5, max_concurrency: 64}
  sweep: [{concurrency: 1}, {concurrency: 4}, {concurrency: 16}]
slos: {ttft_s: 0.5, tpot_s: 0.05, attainment: 0.95}
repeats: 4
checks: false
cost:
  baseline: {usd_per_hour: 2.5, gpus: 1}
  candidate: {usd_per_hour: 2.5, gpus: 2}
  target_rate_rps: 50
baseline:
  launch:
    engine: vllm
    command: [python, -m, vllm.entrypoints.openai.api_server, --model, /m, --port, "8001"]
    env: {VLLM_CPU_KVCACHE_SPACE: "1"}
    port: 8001
    ready_timeout_s: 120
speculation:
  method: ngram
  num_speculative_tokens: 4
  prompt_lookup_max: 4
  prompt_lookup_min: 2
allow_extra_diff: true
"""

MINIMAL = """
workload: builtin:open
loads: {operating: {concurrency: 8}}
baseline: {launch: {engine: speculab, command: [speculab, serve, demo], port: 8123}}
speculation: {method: draft_model, model: demo-draft, num_speculative_tokens: 3}
"""


def test_full_file_becomes_frozen_dataclasses(tmp_path):
    f = tmp_path / "experiment.yaml"
    f.write_text(FULL)
    e = load_experiment(f)
    assert e.name == "ngram on my endpoint"
    assert (e.workload.spec, e.workload.num_prompts, e.workload.api) == ("builtin:grounded", 120, "chat")
    assert e.sampling.min_tokens == 128 and e.sampling.ignore_eos and e.sampling.seed == 7
    assert e.loads.operating.rate_rps == 4.0 and e.loads.operating.arrival == "gamma"
    assert e.loads.operating.label == "4 req/s"
    assert [lv.concurrency for lv in e.loads.sweep] == [1, 4, 16]
    assert e.loads.all_levels()[0] == LoadLevel(concurrency=1)
    assert len(e.loads.all_levels()) == 4  # low == sweep[0] is run once
    assert e.slos.tpot_s == 0.05 and e.slos.attainment == 0.95
    assert e.repeats == 4 and e.checks is False and e.allow_extra_diff
    assert e.cost.candidate.gpus == 2 and e.cost.target_rate_rps == 50
    assert e.baseline.launch.engine == "vllm" and e.baseline.base_url == "http://127.0.0.1:8001"
    assert e.baseline.launch.command[-1] == "8001" and e.baseline.launch.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert json.loads(e.speculation.speculative_config_json()) == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_max": 4,
        "prompt_lookup_min": 2,
    }
    assert e.speculation.label == "ngram k=4"
    with pytest.raises(AttributeError):
        e.repeats = 2  # type: ignore[misc]
    json.dumps(e.to_dict())  # manifest-ready


def test_minimal_file_gets_defaults():
    e = parse_experiment(MINIMAL)
    assert e.workload.spec == "builtin:open" and e.workload.num_prompts is None
    assert e.loads.low == LoadLevel(concurrency=1) and e.loads.sweep == ()
    assert e.sampling.temperature == 0.0 and e.sampling.max_tokens is None and e.sampling.default_max_tokens == 256
    assert e.repeats == 1 and e.checks and e.cost is None and not e.two_url_mode
    assert json.loads(e.speculation.speculative_config_json())["model"] == "demo-draft"


def test_two_url_mode():
    e = parse_experiment(
        """
workload: builtin:open
loads: {operating: {concurrency: 4}}
baseline: {url: "http://a:8000"}
candidate: {url: "http://b:8000"}
speculation: {method: ngram, num_speculative_tokens: 4}
"""
    )
    assert e.two_url_mode and e.baseline.base_url == "http://a:8000"


def _err(text: str) -> str:
    with pytest.raises(UserError) as ei:
        parse_experiment(textwrap.dedent(text), "experiment.yaml")
    msg = str(ei.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("concurrency: 8}}", "rate: -2}}"), "experiment.yaml: loads.operating.rate: must be > 0"),
        (("loads:", "lods:"), "experiment.yaml: lods: unknown key; did you mean `loads`?"),
        (("num_speculative_tokens: 3", "num_speculative_token: 3"), "speculation.num_speculative_token: unknown key"),
        (
            ("num_speculative_tokens: 3", "num_speculative_tokens: 0"),
            "speculation.num_speculative_tokens: must be >= 1",
        ),
        (("model: demo-draft, ", ""), "speculation: method draft_model needs `model`"),
        (("method: draft_model", 'method: "two words"'), "speculation.method: must be a method name"),
        (("engine: speculab", "engine: ollama"), "baseline.launch.engine: must be one of"),
        (("port: 8123", "port: 70000"), "baseline.launch.port: must be a TCP port (1-65535) or auto, got 70000"),
        (("command: [speculab, serve, demo]", "command: []"), "baseline.launch.command: must not be empty"),
        (("{concurrency: 8}", "{concurrency: 8, rate: 2}"), "loads.operating: give exactly one of `concurrency`"),
        (("workload: builtin:open", "workload: {spec: x, num_prompt: 3}"), "workload.num_prompt: unknown key"),
        (("workload: builtin:open", "workload: 5"), "workload: must be a workload spec string"),
        (("loads: {operating: {concurrency: 8}}", "loads: 5"), "loads: must be a mapping"),
        (("[speculab, serve, demo]", "speculab serve demo"), "baseline.launch.command: must be a list of arguments"),
        (("port: 8123", "port: eighty"), "baseline.launch.port: must be a TCP port (1-65535) or auto, got 'eighty'"),
        (("{concurrency: 8}", "{concurrency: 2.5}"), "loads.operating.concurrency: must be an integer"),
        (("num_speculative_tokens: 3", "num_speculative_tokens: true"), "num_speculative_tokens: must be an integer"),
        (("port: 8123", "port: 8123, env: {A: 1}"), "baseline.launch.env.A: must be a string (quote it)"),
        (("workload: builtin:open", "workload: {api: chat}"), "workload.spec: required key is missing"),
        (
            ("{concurrency: 8}", "{rate: 2, burstiness: 0.5}"),
            "loads.operating: burstiness shapes gamma arrivals only; set arrival: gamma (not poisson)",
        ),
    ],
)
def test_each_mistake_is_one_line_with_the_key_path(change, expected):
    old, new = change
    assert old in MINIMAL
    assert expected in _err(MINIMAL.replace(old, new, 1))


def test_every_unknown_key_at_any_depth_is_named_with_its_fix():
    text = MINIMAL.replace("num_speculative_tokens: 3", "num_speculative_token: 3").replace(
        "port: 8123", "port: 8123, ready_timout_s: 60"
    )
    msg = _err(text)
    assert "speculation.num_speculative_token: unknown key; did you mean `num_speculative_tokens`?" in msg
    assert "baseline.launch.ready_timout_s: unknown key; did you mean `ready_timeout_s`?" in msg
    assert "more)" not in msg and "required key is missing" not in msg  # the misspelling explains the missing key
    listed = MINIMAL.replace("speculation: {", "speculation: [{").replace(
        "num_speculative_tokens: 3}", "num_speculative_tokens: 3}, {method: ngram, num_speculativ_tokens: 4}]"
    )
    assert "speculation[1].num_speculativ_tokens: unknown key; did you mean `num_speculative_tokens`?" in _err(listed)
    assert "did you mean `ngram`?" in _err(MINIMAL.replace("method: draft_model", "method: ngarm"))


def test_sweep_errors_name_the_index():
    base = MINIMAL.replace("{operating: {concurrency: 8}}", "{operating: {concurrency: 8}, sweep: SWEEP}")
    assert _err(base.replace("SWEEP", "[{concurrency: 1}, {rate: 1}, {rate: 0}]")).startswith(
        "experiment.yaml: loads.sweep[2].rate: must be > 0"
    )
    assert "did you mean `concurrency`" in _err(base.replace("SWEEP", "[{concurrency: 1}, {concurency: 2}]"))
    assert "mixes concurrency and rate" in _err(base.replace("SWEEP", "[{concurrency: 1}, {rate: 2}]"))
    assert "at least 2 loads" in _err(base.replace("SWEEP", "[{concurrency: 1}]"))


def test_arm_rules():
    url_only = MINIMAL.replace(
        "{launch: {engine: speculab, command: [speculab, serve, demo], port: 8123}}", '{url: "http://x:1"}'
    )
    assert "give candidate.url too" in _err(url_only)
    other = MINIMAL.replace("engine: speculab", "engine: other")
    assert "give candidate.command" in _err(other)
    both = MINIMAL.replace("{launch:", '{url: "http://x:1", launch:')
    assert "exactly one of `url`" in _err(both)
    assert "must start with http" in _err(url_only.replace("http://x:1", "x:1") + "candidate: {url: 'http://y:1'}\n")


def test_sampling_and_speculation_cross_checks():
    assert "min_tokens (300) must be <= max_tokens (256)" in _err(MINIMAL + "sampling: {min_tokens: 300}\n")
    ngram = MINIMAL.replace("method: draft_model, model: demo-draft", "method: ngram")
    assert "prompt_lookup_min (3) must be <= prompt_lookup_max (2)" in _err(
        ngram.replace(
            "num_speculative_tokens: 3", "num_speculative_tokens: 3, prompt_lookup_min: 3, prompt_lookup_max: 2"
        )
    )


def test_file_and_yaml_problems(tmp_path):
    with pytest.raises(UserError, match="no such file; write one with `speculab init"):
        load_experiment(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("workload: [unclosed\n")
    with pytest.raises(UserError, match=r"bad.yaml:\d+:\d+: not valid YAML"):
        load_experiment(bad)
    with pytest.raises(UserError, match="expected a mapping"):
        parse_experiment("- a\n- b\n")


def test_relative_workload_files_resolve_against_the_experiment_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "prompts.jsonl").write_text('{"prompt": "hi"}\n')
    f = tmp_path / "sub" / "experiment.yaml"
    f.write_text(MINIMAL.replace("workload: builtin:open", "workload: prompts.jsonl"))
    assert load_experiment(f).workload.spec == str(tmp_path / "sub" / "prompts.jsonl")
    f.write_text(MINIMAL.replace("workload: builtin:open", "workload: {spec: 'sharegpt:prompts.jsonl'}"))
    assert load_experiment(f).workload.spec == "sharegpt:" + str(tmp_path / "sub" / "prompts.jsonl")
    f.write_text(MINIMAL)
    assert load_experiment(f).workload.spec == "builtin:open"
    assert "sampling.seed: must be >= 0" in _err(MINIMAL + "sampling: {seed: -1}\n")


def test_ramp_up_is_a_closed_loop_option_that_reaches_the_load() -> None:
    from speculab.commands.run.blocks import Silent
    from speculab.commands.run.lifecycle import Lifecycle
    from speculab.commands.run.plan import plan_experiment

    plain = "loads: {operating: {concurrency: 8}}"
    ramped = MINIMAL.replace(plain, "loads: {operating: {concurrency: 8, ramp_up_s: 1.5}}")
    e = parse_experiment(ramped)
    assert e.loads.operating.ramp_up_s == 1.5 and e.loads.low.ramp_up_s == 0.0
    plan = plan_experiment(e)
    life = Lifecycle(plan, Path("unused"), None, None, Silent(), lambda: 0.0)  # type: ignore[arg-type]
    i = next(k for k, lv in enumerate(plan.loads) if lv.concurrency == 8)
    assert life.blocks.load_config(plan.loads[i], 10, 2).ramp_up_s == 1.5
    bad = MINIMAL.replace(plain, "loads: {operating: {rate: 2, ramp_up_s: 1}}")
    assert "ramp_up_s staggers closed-loop workers" in _err(bad)
