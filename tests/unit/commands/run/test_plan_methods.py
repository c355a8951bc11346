"""`speculation.method` takes any name an engine accepts: passed through, checked at plan time against the engine's
own list (a one-line refusal naming the accepted ones, before anything is launched), warned as unchecked when the
engine cannot be read; today's five work as before, asking nothing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tests.fakes.words import screen_lines

from speculab.commands.run.plan import describe_plan, plan_experiment
from speculab.config import SpeculationConfig, parse_experiment
from speculab.errors import UserError
from speculab.harness.results.warnings import WarningKind
from speculab.harness.servers.adapters import adapter_for, parse_command
from speculab.report.phrases import warning_text

VLLM_SOURCE = """from typing import Literal
SpeculativeMethod = Literal["ngram", "draft_model", "suffix", "mtp"]

class SpeculativeConfig:
    num_speculative_tokens: int = None
    model: str | None = None
    method: SpeculativeMethod | None = None
    prompt_lookup_max: int | None = None
    suffix_decoding_max_tree_depth: int = 24
"""


def exp_yaml(method: str, engine: str, command: list[str], extra: str = "") -> str:
    return f"""
workload: {{spec: "synthetic:input=10,output=8", num_prompts: 4}}
loads: {{operating: {{concurrency: 1}}}}
baseline:
  launch: {{engine: {engine}, command: {json.dumps(command)}, port: 8000}}
speculation: {{method: {method}, num_speculative_tokens: 3{extra}}}
"""


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch) -> list[str]:
    """A vLLM package declaring `suffix`, found by this interpreter (never imported: its __init__ would exit)."""
    pkg = tmp_path / "vllm" / "config"
    pkg.mkdir(parents=True)
    (tmp_path / "vllm" / "__init__.py").write_text("raise SystemExit('importing vllm is not allowed here')\n")
    (pkg / "__init__.py").write_text("")
    (pkg / "speculative.py").write_text(VLLM_SOURCE)
    (tmp_path / "arctic_inference").mkdir()  # what vLLM's suffix decoding imports
    (tmp_path / "arctic_inference" / "__init__.py").write_text("")
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
    (note,) = plan.notes  # a record: what went unchecked and why
    assert (note.kind, note.fields["methods"], note.fields["why"]) == (
        WarningKind.METHODS_UNCHECKED,
        ["ngram-map-k"],
        "unreadable",
    )
    said = "warning: speculation method ngram-map-k is unchecked: "
    assert any(line.startswith(said) for line in screen_lines(describe_plan(plan)))
    assert screen_lines(describe_plan(plan))[-1].endswith("; the engine will say at launch")
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
    (note,) = plan.notes
    assert (note.fields["methods"], note.fields["options_of"], note.fields["why"]) == (["suffix"], [], "two_url")
    said = "warning: speculation method suffix is unchecked: in two-URL mode speculab launches no candidate"
    assert warning_text(note) == said and said in screen_lines(describe_plan(plan))


def test_local_model_needs_a_config_json(tmp_path):
    from speculab.harness.servers.methods.here import local_model

    (tmp_path / "empty").mkdir()
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    cards = [{"id": "served", "root": str(tmp_path / "empty")}, {"id": str(tmp_path / "ckpt")}]
    assert local_model(cards) == str(tmp_path / "ckpt")
    assert local_model([{"id": "Qwen/Qwen2.5-7B"}]) is None


def test_an_option_the_vllm_release_does_not_take_is_refused_with_the_nearest_key(fake_vllm):
    good = plan_experiment(parse_experiment(exp_yaml("suffix", "vllm", fake_vllm,
                                                     ", options: {suffix_decoding_max_tree_depth: 32}")))  # fmt: skip
    cfg = json.loads(parse_command(good.arms[1].launch.command).flags["--speculative-config"][0])
    assert cfg == {"method": "suffix", "num_speculative_tokens": 3, "suffix_decoding_max_tree_depth": 32}
    with pytest.raises(UserError) as e:
        plan_experiment(parse_experiment(exp_yaml("suffix", "vllm", fake_vllm,
                                                  ", options: {suffix_max_tree_depth: 32}")))  # fmt: skip
    msg = str(e.value)
    assert "has no --speculative-config key suffix_max_tree_depth" in msg and "`suffix_decoding_max_tree_depth`" in msg


@pytest.fixture
def fake_sglang(tmp_path, monkeypatch) -> list[str]:
    """SGLang 0.5.23's layout: the algorithms as an Enum, the flags as a config class's fields."""
    srt = tmp_path / "sglang" / "srt"
    (srt / "speculative").mkdir(parents=True)
    (srt / "arg_groups" / "fields").mkdir(parents=True)
    (tmp_path / "sglang" / "__init__.py").write_text("raise SystemExit('not importable here')\n")
    (srt / "speculative" / "spec_info.py").write_text(
        "from enum import Enum, auto\nclass SpeculativeAlgorithm(Enum):\n    EAGLE = auto()\n    NGRAM = auto()\n"
        "    NONE = auto()\n"
    )
    (srt / "speculative" / "spec_registry.py").write_text('_RESERVED_ALIASES = frozenset({"NEXTN"})\n')
    (srt / "arg_groups" / "fields" / "spec.py").write_text(
        "class Spec:\n"
        '    speculative_algorithm: A[str, "algorithm"] = None\n'
        '    speculative_draft_model_path: A[str, Arg(help="p", aliases=["--speculative-draft-model"])] = None\n'
        '    speculative_num_steps: A[int, "steps"] = None\n'
        '    speculative_eagle_topk: A[int, "topk"] = None\n'
        '    speculative_num_draft_tokens: A[int, "n"] = None\n'
        '    speculative_boundary_reduction: A[str, Arg(no_cli=True)] = "rs"\n'
        '    speculative_ngram_max_trie_depth: A[int, "depth"] = 18\n'
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return [sys.executable, "-m", "sglang.launch_server", "--model-path", "/m", "--port", "8000"]


def test_sglang_0_5_23_is_read_from_its_enum_and_config_fields(fake_sglang):
    from speculab.harness.servers.methods.probe import declared_by_command

    d = declared_by_command("sglang", fake_sglang)
    assert d.methods == ("EAGLE", "NGRAM", "NEXTN") and not d.fallback
    assert "--speculative-draft-model" in d.option_keys and "--speculative-boundary-reduction" not in d.option_keys
    plan = plan_experiment(parse_experiment(exp_yaml("NEXTN", "sglang", fake_sglang,
                                                     ", options: {ngram_max_trie_depth: 12}")))  # fmt: skip
    assert parse_command(plan.arms[1].launch.command).flags["--speculative-ngram-max-trie-depth"] == ("12",)


def test_a_flag_the_sglang_release_lacks_is_refused_before_launch(fake_sglang):
    with pytest.raises(UserError) as e:  # the window-size flags of older releases are gone from 0.5.23
        extra = ", prompt_lookup_max: 4, options: {ngram_max_trie_depth: 12}"
        plan_experiment(parse_experiment(exp_yaml("ngram", "sglang", fake_sglang, extra)))
    assert "has no flag --speculative-ngram-max-match-window-size" in str(e.value)


def test_llamacpp_flags_are_checked_against_its_help(tmp_path):
    exe = tmp_path / "llama-server"
    exe.write_text("#!/bin/sh\necho '--spec-type none,draft-simple,ngram-mod'\n"
                   "echo '--spec-ngram-mod-n-max N'\necho '--spec-ngram-mod-n-match N'\n")  # fmt: skip
    exe.chmod(0o755)
    command = [str(exe), "-m", "t.gguf", "--port", "8000"]
    ok = plan_experiment(
        parse_experiment(exp_yaml("ngram-mod", "llamacpp", command, ", options: {ngram_mod_n_match: 2}"))
    )
    assert ok.notes == ()
    with pytest.raises(
        UserError, match=r"has no flag --spec-ngram-mod-n-matches.*did you mean `--spec-ngram-mod-n-match`"
    ):
        plan_experiment(parse_experiment(exp_yaml("ngram-mod", "llamacpp", command,
                                                  ", options: {ngram_mod_n_matches: 2}")))  # fmt: skip


def test_tgi_medusa_plans_against_a_baseline_with_speculate_0(tmp_path):
    exe = tmp_path / "text-generation-launcher"
    exe.write_text("#!/bin/sh\necho '      --speculate <SPECULATE>'\n")
    exe.chmod(0o755)
    command = [str(exe), "--model-id", "/medusa", "--port", "8000", "--speculate", "0"]
    plan = plan_experiment(parse_experiment(exp_yaml("medusa", "tgi", command)))
    assert plan.notes == () and plan.changes[0].verified is True
    assert parse_command(plan.arms[1].launch.command).flags["--speculate"] == ("3",)
    with pytest.raises(UserError, match="add `--speculate 0`"):
        plan_experiment(parse_experiment(exp_yaml("medusa", "tgi", command[:-2])))


def test_suffix_without_arctic_inference_is_refused_before_launch(fake_vllm, tmp_path):
    (tmp_path / "arctic_inference" / "__init__.py").unlink()
    (tmp_path / "arctic_inference").rmdir()
    with pytest.raises(UserError, match="suffix: needs arctic_inference, which is not installed for"):
        plan_experiment(parse_experiment(exp_yaml("suffix", "vllm", fake_vllm)))


def test_sglang_ngram_window_flags_are_checked_though_ngram_is_one_of_the_five(fake_sglang):
    with pytest.raises(UserError, match="has no flag --speculative-ngram-max-match-window-size"):
        plan_experiment(parse_experiment(exp_yaml("ngram", "sglang", fake_sglang, ", prompt_lookup_max: 4")))
