"""Planning an A/B run: candidate derivation, the single-change rule and --allow-extra-diff, levels, same
sampling in every arm. Nothing is started here."""

from __future__ import annotations

import itertools
import json

import pytest
from tests.fakes.words import screen_lines

from speculab.commands.run.plan import derive_candidate, enforce_single_change, plan_experiment, sampling_extras
from speculab.config import SpeculationConfig, parse_experiment
from speculab.errors import UserError
from speculab.harness.results.ab_run import not_checked
from speculab.harness.results.warnings import WarningKind
from speculab.harness.servers.adapters import adapter_for
from speculab.harness.servers.process import ServerCommand

VLLM = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--port", "8000"]


def exp_yaml(candidate: str = "", extra: str = "", engine: str = "vllm", command: list[str] | None = None) -> str:
    return f"""
workload: {{spec: "synthetic:input=10,output=8", num_prompts: 6}}
sampling: {{temperature: 0.0, max_tokens: 32, top_k: 5, min_tokens: 4, seed: 7}}
loads:
  low: {{concurrency: 1}}
  operating: {{rate: 2.5, arrival: constant, max_concurrency: 8}}
  sweep: [{{rate: 1}}, {{rate: 2.5}}, {{rate: 5}}]
repeats: 2
baseline:
  launch: {{engine: {engine}, command: {json.dumps(command or VLLM)}, port: 8000, env: {{A: "1"}}}}
speculation: {{method: ngram, num_speculative_tokens: 4, prompt_lookup_max: 4, prompt_lookup_min: 2}}
{candidate}
{extra}
"""


def test_vllm_candidate_is_derived_and_verified() -> None:
    seen = []
    plan = plan_experiment(parse_experiment(exp_yaml()), on_change=seen.append)
    base, cand = plan.arms
    assert cand.launch is not None and base.launch is not None
    assert cand.launch.command == (
        *VLLM,
        "--speculative-config",
        '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":2}',
    )
    # the dev-mode variable vLLM needs for its cache-reset endpoint (cache: {reset: between-blocks}, the default)
    assert cand.launch.env == {"A": "1", "VLLM_SERVER_DEV_MODE": "1"} and cand.launch.port == 8000
    assert plan.changes[0].verified is True and seen == list(plan.changes)
    assert cand.info.name == "ngram-k4" and cand.info.label == "ngram k=4" and cand.info.engine == "vllm"
    assert base.info.command == tuple(VLLM) and cand.k == 4


def test_levels_dedup_with_roles_and_same_sampling_for_every_arm() -> None:
    plan = plan_experiment(parse_experiment(exp_yaml()))
    assert [(lv.key, lv.roles) for lv in plan.setup.levels] == [
        ("c1", ("low",)),
        ("r2.5", ("operating", "sweep")),
        ("r1", ("sweep",)),
        ("r5", ("sweep",)),
    ]
    assert plan.loads[1].arrival == "constant" and plan.loads[1].max_concurrency == 8
    assert plan.extra_body == {"top_k": 5, "min_tokens": 4} == sampling_extras(5, 4)
    assert plan.sampling.seed == 7 and plan.sampling.max_tokens == 32 and plan.setup.repeats == 2
    assert len(plan.setup.items) == 6 and all(it.seed is not None for it in plan.setup.items)


def test_extra_difference_is_refused_unless_allowed() -> None:
    cand = {"command": [*VLLM, "--max-model-len", "4096", "--speculative-config", '{"method":"ngram"}']}
    y = exp_yaml(candidate="candidate: " + json.dumps(cand))
    seen = []
    with pytest.raises(UserError, match=r"more than speculation \(.*--max-model-len.*--allow-extra-diff"):
        plan_experiment(parse_experiment(y), on_change=seen.append)
    assert seen and seen[0].verified is False  # the difference was shown before the refusal
    plan = plan_experiment(parse_experiment(y), allow_extra_diff=True)
    note = plan.changes[0].note  # what differs beyond speculation, and that --allow-extra-diff let it run
    assert plan.changes[0].verified is False and note is not None and note.kind == WarningKind.CHANGE_NOT_SPECULATION
    assert note.fields == {"differs": ["+ --max-model-len 4096"], "allowed": True}
    # the file's own allow_extra_diff key works too
    assert plan_experiment(
        parse_experiment(exp_yaml(candidate="candidate: " + json.dumps(cand), extra="allow_extra_diff: true"))
    )


def test_environment_difference_counts_as_extra() -> None:
    y = exp_yaml(
        candidate="candidate: {command: " + json.dumps([*VLLM, "--speculative-config", "{}"]) + ', env: {A: "2"}}'
    )
    with pytest.raises(UserError, match="env A: 1 -> 2"):
        plan_experiment(parse_experiment(y))


def test_identical_candidate_is_refused_with_a_reason() -> None:
    y = exp_yaml(candidate="candidate: " + json.dumps({"command": VLLM}))
    with pytest.raises(UserError, match="identical to the baseline"):
        plan_experiment(parse_experiment(y))


def test_baseline_that_already_speculates_is_refused() -> None:
    cmd = [*VLLM, "--speculative-config", "{}"]
    with pytest.raises(UserError, match="already has speculation flag --speculative-config"):
        plan_experiment(parse_experiment(exp_yaml(command=cmd)))


def test_other_engine_cannot_be_verified_but_runs() -> None:
    y = exp_yaml(
        engine="other",
        command=["srv", "--port", "8000"],
        candidate='candidate: {command: [srv, --port, "8000", --spec]}',
    )
    plan = plan_experiment(parse_experiment(y))
    assert plan.changes[0].verified is None and plan.changes[0].note == not_checked("engine_other")


@pytest.mark.parametrize("engine", ["speculab", "sglang", "llamacpp", "tgi"])
def test_every_engine_adapter_derives_a_single_change(engine: str) -> None:
    spec = SpeculationConfig("draft_model", 4, model="/d") if engine != "tgi" else SpeculationConfig("ngram", 3)
    base = ServerCommand(("server", "--model", "/m", "--port", "9000"), 9000)
    cand, change = derive_candidate(adapter_for(engine), base, spec, name="x")
    assert change.verified is True and cand.command[:5] == base.command
    assert enforce_single_change(change, False) is change


def test_two_url_plan() -> None:
    y = """
workload: "synthetic:input=10,output=8"
loads: {operating: {concurrency: 2}}
baseline: {url: "http://a:1"}
candidate: {url: "http://b:2", model: m2}
speculation: {method: ngram, num_speculative_tokens: 3}
"""
    plan = plan_experiment(parse_experiment(y))
    assert not plan.launch_mode and plan.setup.two_url_mode
    assert [a.info.url for a in plan.arms] == ["http://a:1", "http://b:2"] and plan.arms[1].model == "m2"
    assert plan.changes[0].verified is None and plan.changes[0].diff_lines == ()


def test_api_key_env_must_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECULAB_TEST_KEY", raising=False)
    y = exp_yaml().replace("baseline:\n", "baseline:\n  api_key_env: SPECULAB_TEST_KEY\n")
    with pytest.raises(UserError, match="SPECULAB_TEST_KEY, which is not set"):
        plan_experiment(parse_experiment(y))
    monkeypatch.setenv("SPECULAB_TEST_KEY", "secret")
    plan = plan_experiment(parse_experiment(y))
    assert plan.arms[0].api_key == "secret" and "secret" not in repr(plan.arms[0])


async def test_sampling_logprobs_are_requested_from_every_arm(tmp_path) -> None:
    """`sampling.logprobs: N` reaches each arm's request body, so the report can classify near-ties."""
    import asyncio

    from speculab.commands.run.blocks import Silent
    from speculab.commands.run.lifecycle import Lifecycle
    from speculab.harness.client.endpoint import build_payload

    assert plan_experiment(parse_experiment(exp_yaml())).logprobs is None
    plan = plan_experiment(parse_experiment(exp_yaml().replace("seed: 7}", "seed: 7, logprobs: 2}")))
    assert plan.logprobs == 2
    life = Lifecycle(plan, tmp_path, None, asyncio.Event(), Silent(), lambda: 0.0)  # type: ignore[arg-type]
    for arm in plan.arms:
        req = life.blocks.request(arm, "m")
        assert build_payload(req.endpoint, req.sampling, plan.setup.items[0])["logprobs"] == 2


def test_sampling_max_tokens_overrides_the_items_own_limits_as_bench_does() -> None:
    """Issue 17: `sampling.max_tokens` did not cap built-in items' own limits (warmup generated 318 and 512 tokens)
    while `bench --max-tokens` did."""
    from speculab.harness.client.endpoint import EndpointConfig, build_payload
    from speculab.harness.records import RequestSpec

    item = RequestSpec(0, prompt="write a lot", max_tokens=512)
    ep = EndpointConfig("http://h:1", "m")
    set_it = plan_experiment(parse_experiment(exp_yaml().replace("max_tokens: 32", "max_tokens: 40")))
    assert set_it.setup.max_tokens == 40 and build_payload(ep, set_it.sampling, item)["max_tokens"] == 40
    unset = plan_experiment(parse_experiment(exp_yaml().replace("max_tokens: 32, ", "")))
    assert unset.setup.max_tokens == 256 and build_payload(ep, unset.sampling, item)["max_tokens"] == 512
    assert build_payload(ep, unset.sampling, RequestSpec(1, prompt="x"))["max_tokens"] == 256


def test_the_plan_warns_when_a_concurrency_has_too_few_prompts_for_a_verdict() -> None:
    from speculab.commands.run.plan import describe_plan

    y = (
        exp_yaml()
        .replace("num_prompts: 6", "num_prompts: 16")
        .replace("operating: {rate: 2.5, arrival: constant, max_concurrency: 8}", "operating: {concurrency: 4}")
    )
    plan = plan_experiment(parse_experiment(y))
    few = [line for line in describe_plan(plan) if not isinstance(line, str)]  # a record, worded by the CLI
    assert [(w.kind, w.fields["groups"], w.fields["size"]) for w in few] == [(WarningKind.FEW_GROUPS, 4, 4)]
    lines = screen_lines(describe_plan(plan))
    assert "warning: at concurrency 4 the 16 prompts make 4 groups of 4 sent together; for a verdict they need at " \
        "least 6 groups: use at least 24 prompts at this load" in lines  # fmt: skip
    assert not any("concurrency 1 the" in line for line in lines)  # one at a time: every prompt is a unit
    ok = y.replace("num_prompts: 16", "num_prompts: 24")
    assert not any(
        line.startswith("warning") for line in screen_lines(describe_plan(plan_experiment(parse_experiment(ok))))
    )


# --- several candidates: a list of speculation blocks -----------------------------------------------------------

LIST = """speculation:
  - {method: ngram, num_speculative_tokens: 2}
  - {method: ngram, num_speculative_tokens: 4, prompt_lookup_max: 4}
  - {method: draft_model, num_speculative_tokens: 4, model: /models/draft, name: small-draft}
"""


def test_a_speculation_list_derives_and_checks_every_candidate() -> None:
    y = exp_yaml().replace(
        "speculation: {method: ngram, num_speculative_tokens: 4, prompt_lookup_max: 4, prompt_lookup_min: 2}", LIST
    )
    seen = []
    plan = plan_experiment(parse_experiment(y), on_change=seen.append)
    assert [a.info.name for a in plan.arms] == ["baseline", "ngram-k2", "ngram-k4", "small-draft"]
    assert [a.info.label for a in plan.arms[1:]] == ["ngram k=2", "ngram k=4", "small-draft"]
    assert [c.candidate for c in plan.changes] == ["ngram-k2", "ngram-k4", "small-draft"] == [c.candidate for c in seen]
    assert all(c.verified for c in plan.changes)
    base = plan.arms[0].launch.command
    for arm in plan.arms[1:]:  # each derived from the baseline alone, by its own speculation
        assert arm.launch.command[: len(base)] == base and len(arm.launch.command) == len(base) + 2
    assert '"model":"/models/draft"' in plan.arms[3].launch.command[-1]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("", "candidate: {url: http://127.0.0.1:9}"), "two-URL mode compares one candidate"),
        (("", "candidate: {command: [vllm, serve, m]}"), "candidate.command and candidate.port fit one candidate"),
        (("name: small-draft", "name: ngram-k2"), "two speculation blocks are both named 'ngram-k2'"),
        (("name: small-draft", "name: 'has space'"), "speculation[2].name"),
    ],
)
def test_speculation_list_mistakes_are_one_line(change: tuple[str, str], message: str) -> None:
    y = exp_yaml().replace(
        "speculation: {method: ngram, num_speculative_tokens: 4, prompt_lookup_max: 4, prompt_lookup_min: 2}", LIST
    )
    old, new = change
    y = y.replace(old, new) if old else y + new + "\n"
    if "url:" in new:
        y = y.replace("  launch: {engine: vllm", "  url: http://127.0.0.1:8\n  x_launch: {engine: vllm").replace(
            "  x_launch:", "  #"
        )
    with pytest.raises(UserError, match=re_escape(message)):
        plan_experiment(parse_experiment(y))


def re_escape(s: str) -> str:
    import re

    return re.escape(s)


def test_arm_order_is_abba_for_two_and_a_balanced_latin_square_for_more() -> None:
    from speculab.commands.run.plan import arm_order

    assert [arm_order(2, r) for r in range(1, 5)] == [[0, 1], [1, 0], [0, 1], [1, 0]]
    for n in (3, 4, 5):
        cycle = n if n % 2 == 0 else 2 * n
        rows = [arm_order(n, r) for r in range(1, cycle + 1)]
        assert all(sorted(row) == list(range(n)) for row in rows)
        for pos in range(n):  # every arm in every position, equally often over the cycle
            assert sorted(row[pos] for row in rows) == sorted(list(range(n)) * (cycle // n))
        follows = {}  # every arm follows every other equally often (carry-over balance)
        for row in rows:
            for a, b in itertools.pairwise(row):
                follows[(a, b)] = follows.get((a, b), 0) + 1
        assert len(set(follows.values())) == 1 and len(follows) == n * (n - 1)
        assert arm_order(n, 1)[0] == 0  # the baseline opens the first repeat
