"""The adapter registry is the one place an engine is known: every adapter fills every attribute of the interface,
the config's accepted names and the CLI's --engine help are the registry's, and an adapter registered there (a
throwaway one here) is all `init`, `methods`, the preflight's context fit and the recommended config need."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

import pytest
from tests.fakes.cli_runner import run_main

from speculab.commands.init.starter import StarterSize, starter_yaml
from speculab.commands.run.preflight import command_context
from speculab.commands.run.recommended import recommend_config, speculative_config
from speculab.config import ENGINE_KINDS, SpeculationConfig, parse_experiment
from speculab.errors import UserError
from speculab.harness.servers import adapters
from speculab.harness.servers.adapters import (
    ByLoad,
    EngineAdapter,
    adapter_for,
    askable_engines,
    detect_engine,
    engine_kinds,
)
from speculab.harness.servers.adapters.base import (
    HelpRelease,
    KnownMethods,
)
from speculab.harness.servers.look import ServerLook
from speculab.harness.servers.methods.here import methods_here
from speculab.harness.servers.methods.probe import declared_by_command
from speculab.harness.servers.methods.table import Given
from speculab.harness.verdict.model import BASELINE_CHOICE, LoadChoice, RecommendationBand, RecommendationView

METHODS = ("candidate_command", "launch_command", "by_load")


def test_every_engine_is_one_record_naming_only_what_differs() -> None:
    defaults = EngineAdapter(kind="x", executable="x")
    for kind in engine_kinds():
        adapter = adapter_for(kind)
        assert isinstance(adapter, EngineAdapter) and adapter.kind == kind
        for name in METHODS:
            assert callable(getattr(adapter, name)), f"{kind}.{name}"
        if kind != "other":  # an engine speculab knows says at least how its metrics are named and its speculation
            assert adapter.metric_prefix and adapter.speculation_flags | set(adapter.speculation_prefixes)
            assert adapter.candidate is not defaults.candidate, f"{kind} keeps the refusing candidate hook"
    other = adapter_for("other")
    assert replace(other, kind="x", executable="x") == defaults  # `other` is the defaults: "not this engine"
    with pytest.raises(UserError, match=r"give candidate\.command"):
        other.candidate_command(["serve"], SpeculationConfig("ngram", 2))


def test_the_config_and_the_cli_name_the_registrys_engines(capsys) -> None:
    assert engine_kinds() == ENGINE_KINDS  # config/ may not import the harness: its literal list is held equal here
    assert set(askable_engines()) == {k for k in engine_kinds() if adapter_for(k).declares is not None}
    code, out, _ = run_main(capsys, "methods", "--help")
    assert code == 0
    assert " | ".join(askable_engines()) in re.sub(r"[\s│]+", " ", out)


def test_an_unknown_engine_names_the_registrys() -> None:
    with pytest.raises(UserError, match="use one of " + ", ".join(engine_kinds())):
        adapter_for("nope")


def _toy_help(text: str) -> tuple[str, ...]:
    return ("lookup", "toy-draft") if "--toy-spec" in text else ()


def _toy_candidate(adapter: EngineAdapter, baseline_cmd: Sequence[str], spec: SpeculationConfig) -> list[str]:
    name = {"ngram": "lookup"}.get(spec.method, spec.method)
    return [*baseline_cmd, "--toy-spec", f"{name}:{spec.num_speculative_tokens}"]


def _toy_launch(model: str, port: int, context: int | None) -> list[str] | None:
    return ["toy-serve", model, "--port", str(port), *(["--toy-ctx", str(context)] if context else [])]


def _toy_by_load(b: ByLoad) -> tuple[SpeculationConfig, str, tuple[str, ...]] | None:
    if b.form == "off-above":
        return replace(b.first, num_speculative_tokens=b.top_k), "toy off-above", (f"off above {b.off_above}",)
    return None


# An engine speculab has never heard of: `toy-serve MODEL --port P [--toy-ctx N]`, `--toy-spec METHOD:K`; the record
# names only what differs from "not this engine", as an adapter module does.
TOY = EngineAdapter(
    kind="toy",
    executable="toy-serve",
    metric_prefix="toy:",
    speculation_flags=frozenset({"--toy-spec"}),
    context_flags=("--toy-ctx",),
    starter_grid="  - {method: ngram, num_speculative_tokens: 3}   # the toy's grid\n",
    experiment_names={"lookup": "ngram"},
    declares=HelpRelease(_toy_help, lambda _text, m: ("--toy-spec",) if m else (), str.strip),
    known_methods=KnownMethods("toy 1.0", "its manual", ("lookup", "toy-draft")),
    candidate=_toy_candidate,
    launch=_toy_launch,
    load_form=_toy_by_load,
)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> EngineAdapter:
    monkeypatch.setitem(adapters._ADAPTERS, TOY.kind, TOY)
    return TOY


def test_a_registered_adapter_is_all_init_and_preflight_need(toy: EngineAdapter) -> None:
    assert "toy" in engine_kinds() and "toy" in askable_engines()
    assert detect_engine(None, None, ["toy:spec_drafts_total"]) == "toy"  # by its metric prefix
    assert detect_engine(None, {"data": [{"id": "m", "owned_by": "toy"}]}) == "toy"
    look = ServerLook("http://127.0.0.1:9100", "toy", ({"id": "m"},), None, ())
    text = starter_yaml(look, StarterSize(context=4096))
    assert 'command: ["toy-serve", "m", "--port", "9100", "--toy-ctx", "4096"]' in text
    assert "engine: toy" in text and "  - {method: ngram, num_speculative_tokens: 3}   # the toy's grid" in text
    assert command_context("toy", ["toy-serve", "m", "--toy-ctx", "2048"]) == 2048
    assert command_context("toy", ["toy-serve", "m", "--toy-ctx=1024"]) == 1024


def test_a_registered_adapter_is_all_methods_needs(toy: EngineAdapter, tmp_path) -> None:
    table = methods_here("toy", Given(None, None, None, None), from_server=True)  # its known list, labelled
    assert [r.method for r in table.rows] == ["lookup", "toy-draft"] and "toy 1.0" in table.declared.source
    lookup = table.rows[0]
    assert lookup.available == "yes" and lookup.experiment_method == "ngram"
    assert lookup.flags == ("--toy-spec", "lookup:4")
    exe = tmp_path / "toy-serve"
    exe.write_text("#!/bin/sh\necho '  --toy-spec METHOD:K'\n")
    exe.chmod(0o755)
    asked = declared_by_command("toy", [str(exe)])  # asked through its own --help, read by its own parser
    assert not asked.fallback and asked.methods == ("lookup", "toy-draft") and asked.option_keys == ("--toy-spec",)


SOURCE = """
name: toy
workload: {spec: builtin:grounded, num_prompts: 6}
loads:
  low: {concurrency: 1}
  operating: {concurrency: 16}
baseline: {url: http://127.0.0.1:9100}
candidate: {url: http://127.0.0.1:9101}
speculation: {method: ngram, num_speculative_tokens: 2}
"""


def test_a_registered_adapter_spells_the_recommended_config(toy: EngineAdapter) -> None:
    def band(choice: str, loads: tuple[float, ...], edge: float | None = None) -> RecommendationBand:
        return RecommendationBand(choice, choice, None, None, loads, tuple(f"concurrency {v:g}" for v in loads), edge)

    bands = (band("ngram-k2", (1,), edge=6.5), band(BASELINE_CHOICE, (16,)))
    loads = tuple(LoadChoice("", "", v, b.choice, "faster", 1.0, 1.0, 1.0) for b in bands for v in b.loads)
    view = RecommendationView("concurrency", 0.03, loads, bands, "off-above", "ngram-k2", 6.5)
    r = recommend_config(view, parse_experiment(SOURCE), "toy")
    assert r.form == "toy off-above" and r.notes == ("off above 6",)
    assert r.flags == ("--toy-spec", "lookup:2") and speculative_config(r) is None
