"""The built-in sets: size, validity, freshness, and checks that accept a right answer and reject a wrong one."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from speculab.harness.workload.builtin import list_builtin
from speculab.harness.workload.checks import evaluate, parse_checks, structured_output
from speculab.harness.workload.sources import load_workload

ROOT = Path(__file__).resolve().parents[4]
# the single-turn sets of plain prompts (json, structured outputs, is small: below)
SETS = [b.name for b in list_builtin() if b.kind not in ("mix", "conversation", "structured")]
GROUNDED = {"code-edit", "extraction", "summarize", "rag-qa"}


def items(name: str):
    return {i.prompt_id: i for i in load_workload(f"builtin:{name}", seed=0).items}


def passed(item, text: str) -> bool:
    return all(r.passed for r in evaluate(item.checks, text, item))


def test_list_builtin_names_kinds_and_counts():
    info = {b.name: b for b in list_builtin()}
    assert set(SETS) == {"code-edit", "extraction", "summarize", "rag-qa", "writing", "qa", "math", "long"}
    assert {n for n in SETS if info[n].kind == "grounded"} == GROUNDED
    assert {n for n in SETS if info[n].kind == "open"} == {"writing", "qa", "math"}
    assert info["grounded"].count == sum(info[n].count for n in GROUNDED)
    assert info["mixed"].count == sum(info[n].count for n in SETS if info[n].kind in ("grounded", "open"))
    assert all(b.description for b in info.values())
    assert info["chat"].kind == "conversation" and info["chat"].count == 18
    assert info["json"].kind == "structured" and info["json"].count == 24


def test_the_json_set_asks_for_a_schema_and_checks_the_values():
    """Structured outputs (#50 item 4): each item's response_format is a JSON schema of its fields' shapes, which a
    right answer meets and a prose answer does not; its check judges the values."""
    w = load_workload("builtin:json", seed=0)
    assert 16 <= len(w) <= 24 and len({i.prompt for i in w.items}) == len(w)
    first = w.items[0]
    assert first.response_format["type"] == "json_schema" and first.checks
    right = '{"invoice_number": "BP-20931", "vendor": "Brisby Print & Design", "total": 1284.5, "currency": "EUR", '
    right += '"due_date": "2024-11-13"}'
    assert structured_output(right, first.response_format).passed and passed(first, right)
    assert not structured_output(f"Here it is: {right}", first.response_format).passed  # valid only as JSON alone
    assert not structured_output(right.replace("}", ', "note": 1}'), first.response_format).passed  # no other key
    assert not passed(first, right.replace("1284.5", "1284"))  # the value check
    for item in w.items:
        assert item.response_format["json_schema"]["schema"]["additionalProperties"] is False


def test_the_chat_set_is_conversations_whose_later_turns_build_on_the_answer():
    w = load_workload("builtin:chat", seed=0)
    convs = {}
    for it in w.items:
        convs.setdefault(it.conversation_id, []).append(it)
    assert len(convs) == 18 and {len(c) for c in convs.values()} == {2, 3}
    assert {c[0].category for c in convs.values()} == {"chat-code", "chat-document", "chat-writing"}
    for turns in convs.values():
        assert [t.turn for t in turns] == list(range(1, len(turns) + 1))
        assert all(not t.checks for t in turns[:-1])  # checks judge the last answer
        if turns[0].category != "chat-writing":
            assert turns[-1].checks
        for later in turns[1:]:  # a later turn adds a user message to the conversation so far
            assert later.prompt.startswith("\n\nUser: ") and later.prompt.endswith("\n\nAssistant:")
    code = next(c for c in convs.values() if c[0].category == "chat-code")
    assert "starting from your version" in code[1].prompt


@pytest.mark.parametrize("name", SETS)
def test_every_set_has_at_least_30_valid_items(name):
    w = load_workload(f"builtin:{name}", seed=0)
    assert len(w) >= 30
    assert w.source.startswith(f"builtin:{name} v") and "sha256" in w.source
    ids = [i.prompt_id for i in w.items]
    assert len(set(ids)) == len(ids)
    assert len({i.prompt for i in w.items}) == len(w)  # no duplicate prompts
    for item in w.items:
        assert item.category == name and item.max_tokens and item.prompt.strip()
        parse_checks(item.checks)  # valid (the loader checked already; this keeps the test honest)
        if name in GROUNDED or name == "math":
            assert item.checks, f"{item.prompt_id} has no checks"
    lengths = [len(i.prompt) for i in w.items]
    assert max(lengths) > 1.5 * min(lengths)  # varied lengths


def test_data_is_small_and_in_sync_with_its_generator():
    data = ROOT / "src" / "speculab" / "harness" / "workload" / "data"
    assert sum(p.stat().st_size for p in data.glob("*.jsonl")) < 1_000_000
    script = ROOT / "scripts" / "make_builtin_workloads.py"
    proc = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_math_answers_by_hand():
    math = items("math")
    # Worked by hand: 20 - 4*3 = 8; 80*2 + 120*3 = 520; (12+2)*(8+2) - 12*8 = 44; 40*0.75*1.10 = 33.
    for pid, answer in [("math-000", "8"), ("math-002", "520"), ("math-004", "44"), ("math-008", "33")]:
        item = math[pid]
        assert passed(item, f"Working it out step by step...\nAnswer: {answer}")
        assert passed(item, f"**Answer:** ${answer}.00")
        assert not passed(item, f"Answer: {answer}1")
        assert not passed(item, f"The answer is probably {answer}.")  # no 'Answer:' line
        assert not passed(item, "Answer: 7")


def test_every_math_check_accepts_its_own_answer_and_rejects_a_neighbour():
    for item in load_workload("builtin:math", seed=0).items:
        shown = item.checks[0]["name"].removeprefix("answer ")
        assert passed(item, f"Answer: {shown}"), item.prompt_id
        assert not passed(item, f"Answer: {float(shown) + 1:g}"), item.prompt_id


def test_extraction_answer_by_hand():
    item = items("extraction")["extraction-000"]
    assert "BP-20931" in item.prompt
    right = (
        '```json\n{"invoice_number": "BP-20931", "vendor": "Brisby Print & Design", "total": 1284.50, '
        '"currency": "EUR", "due_date": "2024-11-13"}\n```'
    )
    assert passed(item, right)
    assert not passed(item, right.replace("1284.50", "1284"))
    assert not passed(item, right.replace("2024-11-13", "13 November 2024"))
    assert not passed(item, "The invoice number is BP-20931 and the total is 1,284.50 EUR.")


def test_code_edit_answer_by_hand():
    item = items("code-edit")["code-edit-000"]
    assert "Rename the function to `duration_to_seconds`" in item.prompt
    original = re.search(r"```python\n(.*?)```", item.prompt, re.S).group(1)
    renamed = original.replace("def parse_duration(text):", "def duration_to_seconds(text):")
    assert passed(item, f"```python\n{renamed}```")
    assert not passed(item, f"```python\n{original}```")


def test_echoing_the_code_never_passes_a_code_edit():
    for item in load_workload("builtin:code-edit", seed=0).items:
        original = re.search(r"```python\n(.*?)```", item.prompt, re.S).group(1)
        assert not passed(item, original), f"{item.prompt_id}: unedited code passes its checks"


def test_rag_and_summary_answers_by_hand():
    rag = items("rag-qa")["rag-qa-000"]
    assert "Harlow" in rag.prompt and rag.prompt.rstrip().endswith("boil their tap water?")
    right = (
        'Document [1] says: "The notice stays in force until March 14, when crews expect to finish replacing a '
        'failed dosing pump." Answer: until March 14.'
    )
    assert passed(rag, right)
    assert not passed(rag, right.replace("March 14", "March 21"))
    assert not passed(rag, right.replace("Document [1]", "Document [2]"))
    summary = items("summarize")["summarize-000"]
    assert passed(summary, "- Harlow Valley residents north of the Pell River must boil water until March 14.")
    assert not passed(summary, "- Residents must boil their water for a while.")


def test_refusals_fail_every_grounded_check():
    refusal = "I'm sorry, but I can't help with that."
    for name in GROUNDED:
        for item in load_workload(f"builtin:{name}", seed=0).items:
            assert not passed(item, refusal), item.prompt_id


def test_qa_and_writing_checks():
    qa = items("qa")["qa-000"]
    assert passed(qa, "Sunlight is scattered by air molecules; blue light scatters most (Rayleigh scattering).")
    assert not passed(qa, "The sky reflects the color of the ocean.")
    email = items("writing")["writing-001"]
    assert passed(email, "Dear Ms Patel, the heating has been broken for six days now...")
    assert not passed(email, "Dear Ms Patel, the heating is broken.")


def test_the_long_set_asks_for_long_answers_and_joins_no_mix():
    info = {b.name: b for b in list_builtin()}
    assert info["long"].kind == "long" and 20 <= info["long"].count <= 40
    assert all(i.max_tokens >= 512 for i in items("long").values())  # where loops show (the degeneration check)
    mixes = [i.prompt for m in ("grounded", "open", "mixed") for i in load_workload(f"builtin:{m}", seed=0).items]
    assert not {i.prompt for i in items("long").values()} & set(mixes)
