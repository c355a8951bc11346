"""The recommendation spelt for the engine (commands.run.recommended): one config where one candidate pays at
every load, the engine's load-dependent form where that release has one, and recommended.yaml that parses back as
an experiment with just the winner."""

from __future__ import annotations

import json

from speculab.commands.run.recommended import (
    SCHEDULE_END,
    flags_text,
    recommend_config,
    recommended_yaml,
    speculative_config,
)
from speculab.config import parse_experiment
from speculab.harness.verdict.model import BASELINE_CHOICE, LoadChoice, RecommendationBand, RecommendationView

SOURCE = """
name: k sweep
workload: {spec: builtin:grounded, num_prompts: 6}
loads:
  low: {concurrency: 1}
  operating: {concurrency: 16}
  sweep: [{concurrency: 1}, {concurrency: 4}, {concurrency: 16}]
baseline:
  launch: {engine: speculab, command: [speculab, serve, demo, --port, "8123"], port: 8123}
speculation:
  - {method: ngram, num_speculative_tokens: 2}
  - {method: ngram, num_speculative_tokens: 8}
  - {method: draft_model, num_speculative_tokens: 4, model: demo-draft}
"""
EXP = parse_experiment(SOURCE)


def band(choice: str, loads: tuple[float, ...], edge: float | None = None, k: int | None = None) -> RecommendationBand:
    return RecommendationBand(choice, choice, None, k, loads, tuple(f"concurrency {v:g}" for v in loads), edge)


def rec(form: str, *bands: RecommendationBand, winner: str | None = None) -> RecommendationView:
    loads = tuple(LoadChoice("", "", v, b.choice, "faster", 1.0, 1.0, 1.0) for b in bands for v in b.loads)
    off = bands[0].upper_edge if form == "off-above" else None
    return RecommendationView("concurrency", 0.03, loads, bands, form, winner, off)


def test_one_winner_everywhere_ships_as_measured() -> None:
    r = recommend_config(rec("single", band("ngram-k8", (1, 4, 16)), winner="ngram-k8"), EXP, "speculab")
    assert r.form == "single" and speculative_config(r) == {"method": "ngram", "num_speculative_tokens": 8}
    assert r.flags[0] == "--speculative-config"


def test_off_above_uses_disable_by_batch_size_on_speculab_at_the_crossover() -> None:
    view = rec("off-above", band("ngram-k2", (1, 4), edge=9.7), band(BASELINE_CHOICE, (16,)), winner="ngram-k2")
    r = recommend_config(view, EXP, "speculab")
    assert speculative_config(r) == {"method": "ngram", "num_speculative_tokens": 2, "disable_by_batch_size": 9}
    # bracketed edge (no crossover between 4 and 16): off above the highest load measured to pay
    view = rec("off-above", band("ngram-k2", (1, 4)), band(BASELINE_CHOICE, (16,)), winner="ngram-k2")
    assert speculative_config(recommend_config(view, EXP, "speculab"))["disable_by_batch_size"] == 4  # type: ignore[index]


def test_vllm_schedule_only_where_the_release_has_it() -> None:
    view = rec("per-load", band("ngram-k8", (1,)), band("ngram-k2", (4,)), band(BASELINE_CHOICE, (16,)))
    r = recommend_config(view, EXP, "vllm", "0.32.0")
    cfg = speculative_config(r)
    assert r.form == "batch-size schedule" and cfg is not None
    assert cfg["num_speculative_tokens"] == 8  # the schedule's largest k: vLLM treats it as the most
    assert cfg["num_speculative_tokens_per_batch_size"] == [[1, 1, 8], [2, 4, 2], [5, SCHEDULE_END, 0]]
    old = recommend_config(view, EXP, "vllm", "0.10.1")
    assert old.form == "lowest band" and "num_speculative_tokens_per_batch_size" not in (speculative_config(old) or {})
    assert "no load-dependent form" in old.notes[0]
    # speculab keys no k on the batch size: the lowest band's k as measured, drafts off above its edge (its adaptive
    # k, a policy the run did not measure, is not shipped in place of the measured k)
    ours = recommend_config(view, EXP, "speculab")
    assert ours.form == "off-above (per-load)"
    assert speculative_config(ours) == {"method": "ngram", "num_speculative_tokens": 8, "disable_by_batch_size": 1}


def test_different_methods_per_load_fall_back_to_the_lowest_band() -> None:
    view = rec("per-load", band("draft_model-k4", (1,)), band("ngram-k2", (4,)), band(BASELINE_CHOICE, (16,)))
    r = recommend_config(view, EXP, "vllm", "0.32.0")
    assert r.form == "lowest band" and speculative_config(r)["method"] == "draft_model"  # type: ignore[index]


def test_an_options_file_the_flags_name_is_said_in_full_in_the_flags_file() -> None:
    """TensorRT-LLM's flag names a file speculab wrote in a temporary directory: recommended-flags.txt says what it
    must hold, so the configuration ships without it."""
    r = recommend_config(rec("single", band("ngram-k8", (1, 4, 16)), winner="ngram-k8"), EXP, "trtllm")
    assert r.flags[0] == "--extra_llm_api_options"
    text = flags_text(r, "trtllm", "1.0")
    assert f"# {r.flags[1]} must hold these lines" in text
    assert "#   speculative_config:\n#     decoding_type: NGram\n#     max_draft_len: 8\n" in text


def test_plain_adds_nothing() -> None:
    r = recommend_config(rec("plain", band(BASELINE_CHOICE, (1, 4, 16))), EXP, "speculab")
    assert r.speculation is None and r.flags == ()
    assert "nothing: keep the baseline command" in flags_text(r, "speculab", "")


def test_recommended_yaml_is_the_runs_file_with_just_the_winner() -> None:
    view = rec("off-above", band("ngram-k2", (1, 4), edge=9.7), band(BASELINE_CHOICE, (16,)), winner="ngram-k2")
    r = recommend_config(view, EXP, "speculab")
    again = parse_experiment(recommended_yaml(SOURCE, r))
    (sp,) = again.speculations
    assert sp.method == "ngram" and sp.num_speculative_tokens == 2 and sp.options == {"disable_by_batch_size": 9}
    assert again.loads == EXP.loads and again.baseline == EXP.baseline and again.workload == EXP.workload
    text = flags_text(r, "speculab", "")
    assert json.loads(text.splitlines()[1].split(" ", 1)[1].strip("'"))["disable_by_batch_size"] == 9


def test_a_workload_file_relative_to_the_experiment_keeps_working_from_the_run_directory(tmp_path) -> None:
    from speculab.config import load_experiment

    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "prompts.jsonl").write_text('{"prompt": "hello"}\n', encoding="utf-8")
    src = SOURCE.replace("{spec: builtin:grounded, num_prompts: 6}", "{spec: jsonl:prompts.jsonl, num_prompts: 1}")
    (tmp_path / "exp" / "e.yaml").write_text(src, encoding="utf-8")
    exp = load_experiment(tmp_path / "exp" / "e.yaml")
    view = rec("single", band("ngram-k8", (1, 4, 16)), winner="ngram-k8")
    text = recommended_yaml(src, recommend_config(view, exp, "speculab"), exp.workload.spec)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "recommended.yaml").write_text(text, encoding="utf-8")
    again = load_experiment(tmp_path / "run" / "recommended.yaml")  # from the run directory: the same file
    assert again.workload.spec == exp.workload.spec == f"jsonl:{tmp_path / 'exp' / 'prompts.jsonl'}"
    assert again.workload.num_prompts == 1  # the rest of the mapping kept
    # a built-in set is not a path: unchanged
    plain = recommended_yaml(SOURCE, recommend_config(view, EXP, "speculab"), EXP.workload.spec)
    assert "spec: builtin:grounded" in plain


def test_too_few_prompts_at_one_load_writes_no_off_above_flags_for_it() -> None:
    """Issue 36: a load with too few pairs is undecided, never plain, so no `disable_by_batch_size` is derived from
    it; the same load measured slower does give the off-above form (the test can fail)."""
    from tests.unit.harness.verdict.test_recommendation import ARMS, cand, level

    from speculab.harness.verdict.recommendation import recommend

    def flags(second: str) -> tuple[str, dict | None, tuple[str, ...]]:
        levels = [level(1, {"ngram-k2": ("faster", 1.6)}), level(4, {"ngram-k2": (second, 1.7)})]
        arms = (*ARMS, ARMS[1].__class__("ngram-k2", "ngram k=2", "speculab", "", None, "ngram", 2, None, 1, None,
                                        None, ""))  # fmt: skip
        view = recommend(levels, [cand("ngram-k2")], arms, 0.03)
        assert view is not None
        r = recommend_config(view, EXP, "speculab")
        return r.form, speculative_config(r), r.notes

    form, spec, notes = flags("not enough paired data")
    assert spec is not None and "disable_by_batch_size" not in spec and form == "decided loads only"
    assert any("undecided at concurrency 4" in n for n in notes)
    form, spec, _ = flags("slower")
    assert spec is not None and spec.get("disable_by_batch_size") == 1


def test_an_unfinished_run_recommends_nothing() -> None:
    view = rec("incomplete", band("ngram-k2", (1,)))
    r = recommend_config(view, EXP, "speculab")
    assert r.speculation is None and r.flags == () and r.form == "none"
    assert "nothing is recommended yet" in recommended_yaml(SOURCE, r)


def test_a_schedule_plain_at_a_transition_ships_nothing_and_names_it() -> None:
    bands = (band("ngram-k2", (1,)), band(BASELINE_CHOICE, (16,)), band("ngram-k2", (16, 1)))
    loads = (
        LoadChoice("p1", "phase 1, concurrency 1 (0–30 s)", 1, "ngram-k2", "faster", 2, 1.9, 2.1, answer="ship"),
        LoadChoice(
            "t2", "into phase 2, concurrency 16 (30–35 s)", 16, BASELINE_CHOICE, "guardrail", 1, 1, 1, answer="plain"
        ),
    )
    view = RecommendationView("concurrency", 0.03, loads, bands, "per-phase", "ngram-k2", None)
    r = recommend_config(view, EXP, "speculab")
    assert r.speculation is None and r.flags == () and r.form == "plain"
    assert "plain decoding is chosen at into phase 2, concurrency 16 (30–35 s)" in r.notes[0]
