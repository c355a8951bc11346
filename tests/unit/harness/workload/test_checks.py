"""Per-item correctness checks: each type passes on a right answer, fails on a wrong one, and bad specs fail early."""

from __future__ import annotations

import sys
import textwrap

import pytest

from speculab.harness.records import RequestSpec
from speculab.harness.workload.checks import (
    CheckResult,
    CheckSpecError,
    evaluate,
    first_json_value,
    parse_check,
    parse_checks,
    parse_response_format,
    structured_output,
)


def run(spec: dict, text: str, item: RequestSpec | None = None, *, allow_python: bool = False) -> CheckResult:
    (result,) = evaluate([spec], text, item, allow_python=allow_python)
    return result


def test_exact_strips_whitespace_and_can_ignore_case():
    assert run({"type": "exact", "value": "Paris"}, "  Paris\n").passed
    r = run({"type": "exact", "value": "Paris"}, "paris")
    assert not r.passed and "expected exactly 'Paris'" in r.reason
    assert run({"type": "exact", "value": "Paris", "ignore_case": True}, "paris").passed
    assert not run({"type": "exact", "value": "Paris", "strip": False}, "Paris ").passed


def test_contains_single_and_all_of_list():
    assert run({"type": "contains", "value": "42"}, "The answer is 42.").passed
    assert not run({"type": "contains", "value": "Gus"}, "the starter is called gus").passed
    assert run({"type": "contains", "value": "Gus", "ignore_case": True}, "the starter is called gus").passed
    r = run({"type": "contains", "value": ["alpha", "beta"]}, "alpha only")
    assert not r.passed and "'beta'" in r.reason


def test_regex_with_flags():
    spec = {"type": "regex", "pattern": r"answer:\s*520(?![.,]?\d)", "flags": "i"}
    assert run(spec, "so 160 + 360\nANSWER: 520 km").passed
    assert not run(spec, "Answer: 5200").passed
    assert not run(spec, "Answer: 520.5").passed


def test_json_schema_reads_fenced_or_bare_json_and_reports_the_failing_path():
    spec = {
        "type": "json_schema",
        "schema": {
            "type": "object",
            "required": ["invoice_number", "total"],
            "properties": {"invoice_number": {"const": "BP-20931"}, "total": {"type": "number", "const": 1284.5}},
        },
    }
    fenced = 'Here you go:\n```json\n{"invoice_number": "BP-20931", "total": 1284.50}\n```\nAnything else?'
    assert run(spec, fenced).passed
    assert run(spec, 'Sure. {"invoice_number": "BP-20931", "total": 1284.5} Done.').passed
    wrong = run(spec, '{"invoice_number": "BP-20931", "total": 1284}')
    assert not wrong.passed and "total" in wrong.reason
    missing = run(spec, "I could not find an invoice.")
    assert not missing.passed and "no JSON" in missing.reason


def test_first_json_value_skips_braces_that_are_not_json():
    assert first_json_value('use {x} then {"a": 1}') == {"a": 1}
    assert first_json_value("```\n[1, 2]\n```") == [1, 2]
    assert first_json_value("no json here") is None


def test_python_check_gets_output_and_item_and_may_give_a_reason(tmp_path, monkeypatch):
    (tmp_path / "my_checks.py").write_text(
        textwrap.dedent(
            """
            def mentions_id(text, item):
                return item.prompt_id in text, f"looked for {item.prompt_id}"

            def is_short(text, item):
                return len(text) < 10

            def crashes(text, item):
                raise RuntimeError("boom")

            def returns_junk(text, item):
                return "yes"
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    item = RequestSpec(index=0, prompt="p", prompt_id="q-7")
    ok = run({"type": "python", "function": "my_checks:mentions_id"}, "this is q-7", item, allow_python=True)
    assert ok.passed and ok.reason == "looked for q-7"
    assert not run({"type": "python", "function": "my_checks:mentions_id"}, "nothing", item, allow_python=True).passed
    assert run({"type": "python", "function": "my_checks:is_short"}, "tiny", item, allow_python=True).passed
    crash = run({"type": "python", "function": "my_checks:crashes"}, "x", item, allow_python=True)
    assert not crash.passed and "RuntimeError: boom" in crash.reason
    # a crash is a failure even when negated: never a silent pass
    assert not run(
        {"type": "python", "function": "my_checks:crashes", "negate": True}, "x", item, allow_python=True
    ).passed
    assert not run({"type": "python", "function": "my_checks:returns_junk"}, "x", item, allow_python=True).passed
    sys.modules.pop("my_checks", None)


def test_negate_and_name():
    spec = {"type": "contains", "value": "def old_name(", "negate": True, "name": "old name gone"}
    r = run(spec, "def new_name(x):\n    return x")
    assert r == CheckResult("old name gone", True, "")
    r = run(spec, "def old_name(x):\n    return x")
    assert not r.passed and r.name == "old name gone"


def test_evaluate_returns_one_result_per_check_in_order():
    results = evaluate(
        [{"type": "contains", "value": "a"}, {"type": "regex", "pattern": "z+"}, {"type": "exact", "value": "abc"}],
        "abc",
    )
    assert [(r.name, r.passed) for r in results] == [("contains", True), ("regex", False), ("exact", True)]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("contains", "must be an object"),
        ({"value": "x"}, "'type' must be one of"),
        ({"type": "similar", "value": "x"}, "'type' must be one of"),
        ({"type": "contains"}, "needs key(s) value"),
        ({"type": "contains", "value": "x", "ignorecase": True}, "unknown key(s) ignorecase"),
        ({"type": "contains", "value": []}, "non-empty list of strings"),
        ({"type": "contains", "value": 42}, "string or a non-empty list"),
        ({"type": "exact", "value": ["a", "b"]}, "exact check 'value' must be a string"),
        ({"type": "regex", "pattern": "(unclosed"}, "does not compile"),
        ({"type": "regex", "pattern": "x", "flags": "q"}, "letters from 'imsx'"),
        ({"type": "json_schema", "schema": {"type": "objekt"}}, "not a valid JSON Schema"),
        ({"type": "json_schema", "schema": "object"}, "must be a JSON Schema object"),
        ({"type": "python", "function": "no_colon"}, "package.module:function"),
        ({"type": "python", "function": "a.b:c:d"}, "package.module:function"),
        ({"type": "python", "function": "my-checks:f"}, "package.module:function"),
        ({"type": "contains", "value": "x", "negate": "yes"}, "'negate' must be true or false"),
    ],
)
def test_bad_specs_are_rejected_with_a_clear_reason(spec, message):
    with pytest.raises(CheckSpecError, match=None) as e:
        parse_check(spec)
    assert message in str(e.value)


def test_parse_checks_names_the_position():
    with pytest.raises(CheckSpecError, match=r"checks\[1\]: regex check 'pattern' does not compile"):
        parse_checks([{"type": "contains", "value": "ok"}, {"type": "regex", "pattern": "["}])
    with pytest.raises(CheckSpecError, match="must be a list"):
        parse_checks({"type": "contains", "value": "x"})


def _evil_module(tmp_path, monkeypatch) -> tuple[str, object]:
    """A module that leaves a file behind when imported: the proof that something ran its code."""
    marker = tmp_path / "imported"
    (tmp_path / "evil_checks.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\n\ndef judge(text, item):\n    return True\n\nclass NotAFunction:\n"
        "    def __init__(self, text, item):\n        pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("evil_checks", None)
    return "evil_checks", marker


def test_a_python_check_is_validated_without_importing_anything(tmp_path, monkeypatch):
    mod, marker = _evil_module(tmp_path, monkeypatch)
    parse_check({"type": "python", "function": f"{mod}:judge"})  # loading a workload: form only
    r = run({"type": "python", "function": f"{mod}:judge"}, "out")  # evaluating without the opt-in
    assert not r.ran and r.reason == ""  # the report says what was not run, and the flag (python_checks_skipped)
    assert not marker.exists() and mod not in sys.modules


def test_with_the_opt_in_only_plain_functions_outside_the_standard_library_run(tmp_path, monkeypatch):
    mod, marker = _evil_module(tmp_path, monkeypatch)
    doomed = tmp_path / "doomed"
    doomed.mkdir()
    for target in ("os:system", "builtins:exec", "shutil:rmtree", "subprocess:run"):
        r = run({"type": "python", "function": target}, str(doomed), allow_python=True)
        assert r.ran and not r.passed and "standard library" in r.reason, target
    assert doomed.is_dir()  # shutil.rmtree was never called on the path the "output" named
    r = run({"type": "python", "function": f"{mod}:NotAFunction"}, "out", allow_python=True)
    assert not r.passed and "has no function 'NotAFunction'" in r.reason
    assert run({"type": "python", "function": f"{mod}:judge"}, "out", allow_python=True).passed
    assert marker.exists()  # imported only now, with the opt-in
    r = run({"type": "python", "function": "surely_not_a_module_xyz:f"}, "out", allow_python=True)
    assert not r.passed and "cannot import module" in r.reason
    sys.modules.pop(mod, None)


SCHEMA_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "r",
        "schema": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}},
    },
}


@pytest.mark.parametrize(
    ("text", "fmt", "passed", "reason"),
    [
        (' {"n": 3}\n', SCHEMA_FORMAT, True, ""),
        ('{"n": "3"}', SCHEMA_FORMAT, False, "JSON at n: '3' is not of type 'integer'"),
        ('Sure! {"n": 3}', SCHEMA_FORMAT, False, "not JSON"),  # a format honoured sends nothing else
        ('```json\n{"n": 3}\n```', SCHEMA_FORMAT, False, "not JSON"),
        ('{"n": 3', SCHEMA_FORMAT, False, "not JSON"),  # cut short: the stream's last tokens missing
        ("[1]", {"type": "json_object"}, False, "a JSON list, not an object"),
        ('{"a": 1}', {"type": "json_object"}, True, ""),
    ],
)
def test_structured_output_is_the_whole_output_valid_against_its_format(text, fmt, passed, reason):
    result = structured_output(text, fmt)
    assert result is not None and result.passed is passed and result.reason.startswith(reason)


def test_a_text_format_asks_for_nothing_and_a_bad_format_is_named_at_load_time():
    assert structured_output("anything", {"type": "text"}) is None
    assert parse_response_format(SCHEMA_FORMAT) == SCHEMA_FORMAT
    with pytest.raises(CheckSpecError, match="not a valid JSON Schema"):
        parse_response_format({"type": "json_schema", "json_schema": {"schema": {"type": "nope"}}})
