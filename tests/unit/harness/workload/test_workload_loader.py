"""load_workload: every spec kind, determinism, cycling, API rendering, and errors that name file:line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from speculab.errors import UserError
from speculab.harness.records import RequestSpec
from speculab.harness.workload.checks import evaluate, structured_output
from speculab.harness.workload.items import Workload, approx_tokens, render_messages, request_seed
from speculab.harness.workload.sources import load_workload, workload_overview
from speculab.harness.workload.synthetic import parse_synthetic


def write_jsonl(path, objs) -> str:
    path.write_text("".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs), encoding="utf-8")
    return str(path)


# --- JSONL ------------------------------------------------------------------------------------------------------


def test_jsonl_items_keep_order_fields_and_ids(tmp_path):
    path = write_jsonl(
        tmp_path / "mine.jsonl",
        [
            {"id": "a", "prompt": "Say hi", "max_tokens": 5, "category": "greet"},
            "",  # blank lines are skipped
            {"messages": [{"role": "user", "content": "What is 2+2?"}], "checks": [{"type": "contains", "value": "4"}]},
            {"prompt": "third", "answer": "extra keys that are no typo are ignored"},
        ],
    )
    w = load_workload(path, seed=1)
    assert isinstance(w, Workload) and w.name == "mine" and len(w) == 3
    assert path in w.source and "sha256" in w.source
    a, b, c = w.items
    assert (a.index, a.prompt_id, a.prompt, a.max_tokens, a.category) == (0, "a", "Say hi", 5, "greet")
    assert b.prompt == "What is 2+2?" and b.messages is None  # a lone user message renders verbatim
    assert b.checks == ({"type": "contains", "value": "4"},) and b.prompt_id == "line3"
    assert c.prompt_id == "line4"
    assert load_workload(f"jsonl:{path}", seed=1) == w


def test_an_items_response_format_is_kept_for_every_turn_and_in_inputs_json(tmp_path):
    fmt = {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "object", "required": ["n"]}}}
    path = write_jsonl(tmp_path / "s.jsonl", [{"prompt": "a", "response_format": fmt}, {"turns": ["b", "c"]}])
    a, b, c = load_workload(path, seed=0, api="chat").items
    assert a.response_format == fmt and b.response_format is None and c.response_format is None
    assert RequestSpec.from_dict(a.to_dict()) == a
    assert "response_format" not in b.to_dict()  # an item without one keeps its shape (and --resume's plan identity)


def test_chat_api_wraps_prompts_and_keeps_messages(tmp_path):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    path = write_jsonl(tmp_path / "c.jsonl", [{"prompt": "Hello"}, {"messages": msgs}])
    w = load_workload(path, seed=0, api="chat")
    assert w.items[0].prompt is None and w.items[0].messages == ({"role": "user", "content": "Hello"},)
    assert w.items[1].messages == tuple(msgs)
    w = load_workload(path, seed=0, api="completions")
    assert w.items[1].prompt == "System: Be brief.\n\nUser: Hi\n\nAssistant:"


def test_render_messages_text_parts():
    parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert render_messages([{"role": "user", "content": parts}]) == "a\nb"
    with pytest.raises(ValueError, match="only text content parts"):
        render_messages([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"prompt": "ok"', "not valid JSON"),
        ('["a list"]', "expected a JSON object"),
        ('{"max_tokens": 3}', "exactly one of 'prompt'"),
        ('{"prompt": "a", "messages": []}', "exactly one of 'prompt'"),
        ('{"prompt": ""}', "'prompt' must be a non-empty string"),
        ('{"prompt": "a", "max_tokens": 0}', "'max_tokens' must be a positive integer"),
        ('{"prompt": "a", "max_tokens": "64"}', "'max_tokens' must be a positive integer"),
        ('{"prompt": "a", "max_token": 64}', "unknown key 'max_token' (did you mean 'max_tokens'?)"),
        ('{"messages": [{"role": "human", "content": "x"}]}', "messages[0].role must be one of"),
        ('{"messages": [{"content": "x"}]}', "messages[0] must be an object with 'role' and 'content'"),
        ('{"prompt": "a", "checks": [{"type": "regex", "pattern": "("}]}', "checks[0]: regex check 'pattern'"),
        ('{"prompt": "a", "checks": {"type": "exact"}}', "'checks' must be a list"),
        ('{"prompt": "a", "category": 3}', "'category' must be a non-empty string"),
        ('{"prompt": "a", "response_format": {"type": "xml"}}', "'response_format' must be an object whose 'type'"),
        ('{"prompt": "a", "response_format": {"type": "json_schema"}}', "needs 'json_schema': {name, schema}"),
        (
            '{"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": 3}}}}',
            "is not a valid JSON Schema",
        ),
        ('{"prompt": "a", "respons_format": {}}', "did you mean 'response_format'?"),
    ],
)
def test_jsonl_errors_name_file_line_and_reason(tmp_path, line, reason):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "fine"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(UserError) as e:
        load_workload(str(path), seed=0)
    assert str(e.value).startswith(f"{path}:2: ")
    assert reason in str(e.value)


def test_file_level_errors(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_workload(str(tmp_path / "missing.jsonl"), seed=0)
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(UserError, match="no items"):
        load_workload(str(tmp_path / "empty.jsonl"), seed=0)
    (tmp_path / "latin1.jsonl").write_bytes('{"prompt": "caf\xe9"}\n'.encode("latin-1"))
    with pytest.raises(UserError, match="not UTF-8"):
        load_workload(str(tmp_path / "latin1.jsonl"), seed=0)
    with pytest.raises(UserError, match="is a directory"):
        load_workload(f"jsonl:{tmp_path}", seed=0)


def test_messages_with_images_need_the_chat_api(tmp_path):
    parts = [{"type": "image_url", "image_url": {"url": "data:,"}}]
    path = write_jsonl(tmp_path / "img.jsonl", [{"id": "pic", "messages": [{"role": "user", "content": parts}]}])
    assert load_workload(path, seed=0, api="chat").items[0].messages[0]["content"] == parts
    with pytest.raises(UserError, match=r"item pic: .* use --api chat"):
        load_workload(path, seed=0, api="completions")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"spec": "prompts.txt"}, "unknown workload 'prompts.txt'"),
        ({"spec": "builtin:nope"}, "unknown built-in workload 'nope'"),
        ({"spec": "builtin:qa", "api": "responses"}, "api must be one of"),
        ({"spec": "builtin:qa", "seed": -1}, "seed must be a non-negative integer"),
        ({"spec": "builtin:qa", "num_prompts": 0}, "num_prompts must be a positive integer"),
        ({"spec": "jsonl:"}, "workload path is empty"),
    ],
)
def test_bad_arguments(kwargs, message):
    kwargs = {"seed": 0, **kwargs}
    with pytest.raises(UserError, match=None) as e:
        load_workload(kwargs.pop("spec"), **kwargs)
    assert message in str(e.value)


# --- determinism and cycling -------------------------------------------------------------------------------------


def test_same_seed_same_items_and_seeds_different_seed_different_seeds():
    a = load_workload("builtin:mixed", seed=7)
    assert a == load_workload("builtin:mixed", seed=7)
    b = load_workload("builtin:mixed", seed=8)
    assert [i.prompt for i in a.items] == [i.prompt for i in b.items]  # the seed never reorders a set
    assert all(x.seed != y.seed for x, y in zip(a.items, b.items, strict=True))
    seeds = [i.seed for i in a.items]
    assert len(set(seeds)) == len(seeds) and all(0 <= s < 2**31 for s in seeds)
    assert seeds[5] == request_seed(7, 5)


def test_request_seed_is_pinned():
    # Pinned values: if these change, every recorded run's per-request seeds change with them (a breaking change).
    assert [request_seed(0, i) for i in range(3)] == [821328062, 1817441348, 993632895]
    assert request_seed(7, 5) == 1002604896
    assert request_seed(123456789, 10**6) == 467047316


def test_num_prompts_truncates_or_cycles_in_order():
    full = load_workload("builtin:math", seed=3)
    n = len(full)
    short = load_workload("builtin:math", seed=3, num_prompts=5)
    assert short.items == full.items[:5]
    long = load_workload("builtin:math", seed=3, num_prompts=2 * n + 3)
    assert [i.index for i in long.items] == list(range(2 * n + 3))
    for i in range(2 * n + 3):
        assert long.items[i].prompt == full.items[i % n].prompt
        assert long.items[i].prompt_id == full.items[i % n].prompt_id
    assert long.items[n].seed != long.items[0].seed  # a repeated prompt gets its own sampling seed


def test_mixed_interleaves_grounded_and_open():
    cats = [i.category for i in load_workload("builtin:mixed", seed=0, num_prompts=14).items]
    assert cats == ["code-edit", "writing", "extraction", "qa", "summarize", "math", "rag-qa"] * 2
    grounded = {i.category for i in load_workload("builtin:grounded", seed=0).items}
    assert grounded == {"code-edit", "extraction", "summarize", "rag-qa"}
    assert {i.category for i in load_workload("builtin:open", seed=0).items} == {"writing", "qa", "math"}


# --- ShareGPT -----------------------------------------------------------------------------------------------------


def test_sharegpt_first_human_turn_and_reply_length(tmp_path):
    data = [
        {
            "id": "c1",
            "conversations": [
                {"from": "human", "value": "Tell me a joke."},
                {"from": "gpt", "value": "Why did the chicken cross the road?"},
            ],
        },
        {"conversations": [{"from": "system", "value": "sys"}, {"from": "user", "value": "Only a question"}]},
        {"conversations": [{"from": "gpt", "value": "no human turn"}]},  # skipped
        {"conversations": [{"from": "human", "value": "   "}, {"from": "gpt", "value": "x"}]},  # skipped
        {"conversations": []},  # skipped
    ]
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(data))
    w = load_workload(f"sharegpt:{path}", seed=0)
    assert [i.prompt for i in w.items] == ["Tell me a joke.", "Only a question"]
    first = w.items[0]
    assert first.prompt_id == "c1" and first.max_tokens == approx_tokens("Why did the chicken cross the road?") == 8
    assert first.expected_output_tokens == 8
    assert w.items[1].max_tokens is None and w.items[1].prompt_id == "entry1"
    assert "2 conversations used, 3 skipped" in w.source


# --- Spec-Bench / MT-Bench question files ------------------------------------------------------------------


QUESTIONS = [  # the format of Spec-Bench's and MT-Bench's question.jsonl (made-up questions)
    {"question_id": 81, "category": "writing", "turns": ["Write a travel blog post.", "Rewrite it in limericks."]},
    {
        "question_id": 101,
        "category": "reasoning",
        "turns": ["Who is taller?", "And if not?"],
        "reference": ["Alice", "Bob"],
    },
    {"question_id": 161, "category": "translation", "turns": ["Translate into German: hello"]},
]


@pytest.mark.parametrize("kind", ["specbench", "mtbench"])
def test_question_files_become_conversations_one_request_per_turn_by_category(tmp_path, kind):
    path = write_jsonl(tmp_path / "question.jsonl", QUESTIONS)
    w = load_workload(f"{kind}:{path}", seed=3)
    # completions: role form from turn 1, so each later turn's prompt extends the one before
    assert [i.prompt for i in w.items] == [
        "User: Write a travel blog post.\n\nAssistant:",
        "\n\nUser: Rewrite it in limericks.\n\nAssistant:",
        "User: Who is taller?\n\nAssistant:",
        "\n\nUser: And if not?\n\nAssistant:",
        "Translate into German: hello",
    ]
    assert [(i.index, i.conversation_id, i.turn) for i in w.items] == [
        (0, "81", 1), (1, "81", 2), (2, "101", 1), (3, "101", 2), (4, None, None)
    ]  # fmt: skip
    assert [i.category for i in w.items] == ["writing", "writing", "reasoning", "reasoning", "translation"]
    assert len({i.seed for i in w.items}) == 5 and w.name == "question"
    assert f"{kind} questions" in w.source and "3 questions: 1 with 1 turn, 2 with 2 turns" in w.source
    chat = load_workload(f"{kind}:{path}", seed=3, api="chat")
    assert chat.items[0].messages == ({"role": "user", "content": "Write a travel blog post."},)
    assert chat.items[1].messages == ({"role": "user", "content": "Rewrite it in limericks."},)
    first = load_workload(f"{kind}:{path}?turns=1", seed=3)
    assert [i.prompt for i in first.items] == [
        "Write a travel blog post.",
        "Who is taller?",
        "Translate into German: hello",
    ]
    assert "first turns only (?turns=1): 2 later turns not sent" in first.source
    assert load_workload(f"{kind}:{path}?turns=all", seed=3).items == w.items
    with pytest.raises(UserError, match=r"unknown option 'turns=2'; use"):
        load_workload(f"{kind}:{path}?turns=2", seed=3)


def test_num_prompts_counts_requests_and_cycled_conversations_get_their_own_ids(tmp_path):
    path = write_jsonl(tmp_path / "question.jsonl", QUESTIONS)
    w = load_workload(f"mtbench:{path}", seed=0, num_prompts=8)
    assert [(i.conversation_id, i.turn) for i in w.items] == [
        ("81", 1), ("81", 2), ("101", 1), ("101", 2), (None, None), ("81#2", 1), ("81#2", 2), ("101#2", 1)
    ]  # fmt: skip
    overview = workload_overview(w)
    assert overview["conversations"] == 5 and overview["conversation_turns"] == {"1": 2, "2": 3}
    assert overview["distinct_prompts"] == 5


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"question_id": 1, "turns": []}', ":1: 'turns' must be a non-empty list"),
        ('{"question_id": 1, "turns": ["ok", 2]}', ":1: every entry of 'turns' must be a string"),
        ('{"question_id": 1, "turns": ["  "]}', ":1: turn 1 is empty"),
        ('{"question_id": 1, "category": 5, "turns": ["q"]}', ":1: 'category' must be a string"),
        ('{"question_id": [1], "turns": ["q"]}', ":1: 'question_id' must be an integer or a string"),
        ('{"prompt": "a jsonl item"}', ":1: 'turns' must be a non-empty list"),
        ("[1, 2]", ":1: expected a JSON object with 'turns'"),
        ("{oops", ":1: not valid JSON"),
        ("", "no questions"),
    ],
)
def test_question_file_errors_name_the_line(tmp_path, line, message):
    path = tmp_path / "q.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(UserError) as e:
        load_workload(f"mtbench:{path}", seed=0)
    assert str(path) in str(e.value) and message in str(e.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"conversations": []}', "a ShareGPT file is a JSON list"),
        ('[{"conversations": [{"from": "human", "value": "x"}]},\n {"turns": []}]', "entry 1: needs 'conversations'"),
        ("[\n{oops}\n]", ":2: not valid JSON"),
        ('[{"conversations": [{"from": "gpt", "value": "x"}]}]', "no conversation has a non-empty human turn"),
    ],
)
def test_sharegpt_errors(tmp_path, content, message):
    path = tmp_path / "sg.json"
    path.write_text(content)
    with pytest.raises(UserError) as e:
        load_workload(f"sharegpt:{path}", seed=0)
    assert str(path) in str(e.value) and message in str(e.value)


# --- synthetic ----------------------------------------------------------------------------------------------------


def test_synthetic_fixed_lengths_are_exact_in_approximate_tokens():
    w = load_workload("synthetic:input=120,output=40,n=20", seed=5)
    assert len(w) == 20 and w.name == "synthetic"
    for item in w.items:
        assert approx_tokens(item.prompt) == 120
        assert item.max_tokens == item.expected_output_tokens == 40
        assert item.category == "synthetic"
    words = " ".join(i.prompt for i in w.items).lower().replace(".", "").split()
    assert len(set(words)) > 150  # varied words, not one word repeated


def test_synthetic_is_seeded():
    a = load_workload("synthetic:input=64,output=16,n=5", seed=1)
    assert a == load_workload("synthetic:input=64,output=16,n=5", seed=1)
    b = load_workload("synthetic:input=64,output=16,n=5", seed=2)
    assert all(x.prompt != y.prompt for x, y in zip(a.items, b.items, strict=True))


def test_synthetic_n_defaults_to_num_prompts():
    assert len(load_workload("synthetic:input=8,output=8", seed=0, num_prompts=7)) == 7
    assert len(load_workload("synthetic:input=8,output=8", seed=0)) == 100
    w = load_workload("synthetic:input=8,output=8,n=3", seed=0, num_prompts=7)  # n=3 cycled to 7
    assert [i.prompt_id for i in w.items] == [f"synthetic-{k % 3}" for k in range(7)]


@pytest.mark.parametrize(
    ("spec", "mean", "std"),
    [
        ("input=400,output=100,n=3000,dist=normal,spread=0.2", 400, 80),
        ("input=300,output=100,n=3000,dist=uniform,spread=0.5", 300, 300 * 0.5 / np.sqrt(3)),
        ("input=200,output=100,n=3000,dist=lognormal,spread=0.5", 200, 200 * np.sqrt(np.exp(0.25) - 1)),
    ],
)
def test_synthetic_length_distribution_stats(spec, mean, std):
    w = load_workload(f"synthetic:{spec}", seed=11)
    lengths = np.array([approx_tokens(i.prompt) for i in w.items])
    outs = np.array([i.max_tokens for i in w.items])
    # 3000 samples: the sample mean's standard error is std/55, so 3% of the mean is several standard errors
    assert abs(lengths.mean() - mean) < 0.03 * mean
    assert abs(lengths.std() - std) < 0.1 * std
    assert abs(outs.mean() - 100) < 3 and lengths.min() >= 1
    if "uniform" in spec:
        assert lengths.min() >= 150 and lengths.max() <= 450


def test_synthetic_per_side_distributions_and_prefix():
    s = parse_synthetic("input=100,output=50,input_dist=normal,input_spread=0.1,prefix=30")
    assert (s.input.dist, s.input.spread, s.output.dist, s.prefix_tokens) == ("normal", 0.1, "fixed", 30)
    w = load_workload("synthetic:input=100,output=50,prefix=30,n=4", seed=0)
    prefixes = {i.prompt[: len(w.items[0].prompt) // 4] for i in w.items}
    assert len(prefixes) == 1  # the shared prefix opens every prompt
    assert all(approx_tokens(i.prompt) == 100 for i in w.items)
    assert len({i.prompt for i in w.items}) == 4


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        ("input=10", "needs output=TOKENS"),
        ("output=10", "needs input=TOKENS"),
        ("input=10,output=10,colour=red", "bad part 'colour=red'"),
        ("input=10,output", "bad part 'output'"),
        ("input=ten,output=10", "input must be an integer"),
        ("input=0,output=10", "input must be between 1"),
        ("input=10,output=10,dist=poisson", "distribution 'poisson' unknown"),
        ("input=10,output=10,spread=0.2", "spread has no effect"),
        ("input=10,output=10,dist=uniform,spread=1.5", "spread must be > 0 (and < 1 for uniform)"),
        ("input=10,output=10,dist=normal,spread=abc", "spread must be a number"),
        ("input=10,input=20,output=10", "'input' given twice"),
    ],
)
def test_synthetic_grammar_errors(arg, message):
    with pytest.raises(UserError) as e:
        load_workload(f"synthetic:{arg}", seed=0)
    assert message in str(e.value)


def test_the_examples_in_docs_work(tmp_path):
    doc = (Path(__file__).resolve().parents[4] / "docs" / "workloads.md").read_text(encoding="utf-8")
    lines = [ln for ln in doc.splitlines() if ln.startswith(('{"id": "refund-1"', '{"messages"'))]
    assert len(lines) == 2
    w = load_workload(write_jsonl(tmp_path / "doc.jsonl", lines), seed=0)
    assert passed(w.items[0], 'Sure: {"order_id": "A-55"}') and not passed(w.items[0], '{"order_id": "A-56"}')
    assert passed(w.items[1], "paris") and not passed(w.items[1], "Lyon")
    regex, negated = (
        json.loads(ln) for ln in doc.splitlines() if ln.startswith(('{"type": "regex"', '{"type": "contains"'))
    )
    assert evaluate([regex], "Answer: $1,284.50")[0].passed and not evaluate([regex], "Answer: 1284.55")[0].passed
    assert evaluate([negated], "def new_name(x):")[0].passed
    (structured,) = [ln for ln in doc.splitlines() if ln.startswith('{"id": "order-1"')]
    fmt = load_workload(write_jsonl(tmp_path / "s.jsonl", [structured]), seed=0).items[0].response_format
    assert structured_output('{"order_id": "A-55", "items": 3}', fmt).passed
    assert not structured_output('{"order_id": "A-55"}', fmt).passed
    for spec in re.findall(r"^synthetic:input=\d\S*", doc, re.M):
        assert len(load_workload(spec, seed=0, num_prompts=3)) == 3


def passed(item, text: str) -> bool:
    return all(r.passed for r in evaluate(item.checks, text, item))


def test_speed_bench_questions_load_from_jsonl_and_parquet(tmp_path):
    rows = [
        {"question_id": "c-1", "category": "coding", "sub_category": "py", "turns": ["Write a sort.", "Stable?"],
         "source": "x", "src_id": "1", "difficulty": "easy", "multiturn": True},
        {"question_id": "q-1", "category": "qa", "sub_category": "", "turns": ["Why?"], "source": "y", "src_id": "2",
         "difficulty": "hard", "multiturn": False},
    ]  # fmt: skip
    jsonl = load_workload(f"speedbench:{write_jsonl(tmp_path / 'speed.jsonl', rows)}", seed=0)
    assert [(i.conversation_id, i.turn, i.category) for i in jsonl.items] == [
        ("c-1", 1, "coding"), ("c-1", 2, "coding"), (None, None, "qa")
    ]  # fmt: skip
    pq = pytest.importorskip("pyarrow.parquet")
    import pyarrow as pa

    path = tmp_path / "speed.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    parquet = load_workload(f"speedbench:{path}", seed=0)
    assert parquet.items == jsonl.items and "speedbench questions" in parquet.source
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(UserError, match="not a readable parquet file"):
        load_workload(f"speedbench:{tmp_path / 'bad.parquet'}", seed=0)
