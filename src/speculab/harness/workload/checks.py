"""Per-item correctness checks: does this output answer this workload item correctly?

A workload item carries a tuple of check specs (plain dicts, as they appear in JSONL files). Each spec has a
`type` and type-specific keys; `parse_check` validates one at load time (so a typo fails before any load is
sent) and `evaluate` runs them on an output. Checks are pure: same output, same item -> same results.

    {"type": "exact", "value": "Paris"}                        output.strip() == value.strip()
    {"type": "contains", "value": "42", "ignore_case": true}   substring (a list of values: all must appear)
    {"type": "regex", "pattern": "\\b42\\b", "flags": "i"}     re.search; flags from "imsx"
    {"type": "json_schema", "schema": {...}}                    first JSON object/array in the output validates
    {"type": "python", "function": "pkg.mod:fn"}               fn(output_text, item) -> bool | (bool, reason)

Every spec may also carry `name` (shown in reports; defaults to the type) and `negate: true` (pass when the
check would fail, e.g. "must not contain").

An item's `response_format` (structured outputs) is checked here too, where it loads (`parse_response_format`), and an
output against it (`structured_output`: the whole output one JSON value valid against the schema); its validity is
compared per arm by the verdict, apart from the checks (`harness.analysis.paired_checks`).

A `python` check runs code named by a workload file, which may come from anyone: loading a workload never imports
anything (the spec's form is checked, nothing more), and `evaluate` runs python checks only when the caller passes
`allow_python=True` (the user's `--allow-python-checks` or the experiment's `python_checks: true`, for that command).
Even then the target must be a plain function in a module outside the standard library (`os:system`,
`builtins:exec` and `shutil:rmtree` are not correctness checks). A check that was not run says so (`ran=False`).
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema

CHECK_TYPES = ("exact", "contains", "regex", "json_schema", "python")
_COMMON_KEYS = {"type", "name", "negate"}
_TYPE_KEYS: dict[str, tuple[set[str], set[str]]] = {  # type -> (required keys, optional keys)
    "exact": ({"value"}, {"strip", "ignore_case"}),
    "contains": ({"value"}, {"ignore_case"}),
    "regex": ({"pattern"}, {"flags"}),
    "json_schema": ({"schema"}, set()),
    "python": ({"function"}, set()),
}
_REGEX_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}


class CheckSpecError(ValueError):
    """A check spec is malformed; the message says which key and how to fix it (callers add file:line)."""


PYTHON_OPT_IN = "--allow-python-checks"  # the flag (and `python_checks: true` the experiment key) that runs them


@dataclass(frozen=True, slots=True)
class CheckResult:
    name: str
    passed: bool
    reason: str = ""  # why it failed (or passed, for python checks that say so); "" when obvious
    # False: a python check not run (no opt-in); `passed` and `reason` mean nothing then: the report counts such
    # checks and says which flag runs them (the python_checks_skipped warning), so no sentence is kept here
    ran: bool = True


@dataclass(frozen=True, slots=True)
class Check:
    """A validated, ready-to-run check. `spec` is the original dict, kept for records and reports."""

    type: str
    name: str
    negate: bool
    spec: Mapping[str, Any]
    # Compiled state, built once at parse time: a regex or a validator (python checks compile to None: see above).
    compiled: Any = field(default=None, compare=False, repr=False)


def parse_check(spec: Any) -> Check:
    """Validate one check spec (a dict) and compile what it needs; raise CheckSpecError naming the problem."""
    if not isinstance(spec, Mapping):
        raise CheckSpecError(f"a check must be an object with a 'type' key, got {type(spec).__name__}")
    ctype = spec.get("type")
    if ctype not in _TYPE_KEYS:
        raise CheckSpecError(f"check 'type' must be one of {', '.join(CHECK_TYPES)}, got {ctype!r}")
    required, optional = _TYPE_KEYS[ctype]
    missing = required - spec.keys()
    if missing:
        raise CheckSpecError(f"{ctype} check needs key(s) {', '.join(sorted(missing))}")
    unknown = spec.keys() - required - optional - _COMMON_KEYS
    if unknown:
        allowed = ", ".join(sorted(required | optional | _COMMON_KEYS))
        raise CheckSpecError(f"{ctype} check has unknown key(s) {', '.join(sorted(unknown))}; allowed: {allowed}")
    name = spec.get("name", ctype)
    if not isinstance(name, str) or not name:
        raise CheckSpecError("check 'name' must be a non-empty string")
    negate = spec.get("negate", False)
    for flag in ("negate", "strip", "ignore_case"):
        if flag in spec and not isinstance(spec[flag], bool):
            raise CheckSpecError(f"{ctype} check '{flag}' must be true or false")
    compiled = _COMPILERS[ctype](spec)
    return Check(type=ctype, name=name, negate=negate, spec=spec, compiled=compiled)


def parse_checks(specs: Any) -> tuple[Check, ...]:
    """Validate a list of check specs; the error names the failing check's position."""
    if not isinstance(specs, Sequence) or isinstance(specs, (str, bytes)):
        raise CheckSpecError("'checks' must be a list of check objects")
    out = []
    for i, spec in enumerate(specs):
        try:
            out.append(parse_check(spec))
        except CheckSpecError as e:
            raise CheckSpecError(f"checks[{i}]: {e}") from None
    return tuple(out)


def evaluate(
    checks: Sequence[Mapping[str, Any] | Check], output_text: str, item: Any = None, *, allow_python: bool = False
) -> list[CheckResult]:
    """Run each check on `output_text` (item is passed to python checks). A check that crashes fails, with why;
    a python check without `allow_python` is not run (`ran=False`) and nothing is imported."""
    results = []
    for c in checks:
        check = c if isinstance(c, Check) else parse_check(c)
        if check.type == "python" and not allow_python:
            results.append(CheckResult(check.name, False, ran=False))
            continue
        try:
            passed, reason = _RUNNERS[check.type](check, output_text, item)
        except Exception as e:  # a user's python check raising fails that check (negated or not), not the run
            results.append(CheckResult(check.name, False, f"check raised {type(e).__name__}: {e}"))
            continue
        if check.negate:
            passed, reason = not passed, ("" if not passed else "negated check matched")
        results.append(CheckResult(check.name, passed, reason))
    return results


# --- compile: validate type-specific values once ---------------------------------------------------------------


def _compile_value(spec: Mapping[str, Any]) -> tuple[str, ...]:
    value = spec["value"]
    values = (value,) if isinstance(value, str) else value
    if not isinstance(values, (list, tuple)) or not values or not all(isinstance(v, str) for v in values):
        raise CheckSpecError(f"{spec['type']} check 'value' must be a string or a non-empty list of strings")
    if spec["type"] == "exact" and not isinstance(value, str):
        raise CheckSpecError("exact check 'value' must be a string")
    return tuple(values)


def _compile_regex(spec: Mapping[str, Any]) -> re.Pattern[str]:
    pattern, flags = spec["pattern"], spec.get("flags", "")
    if not isinstance(pattern, str):
        raise CheckSpecError("regex check 'pattern' must be a string")
    if not isinstance(flags, str) or set(flags) - _REGEX_FLAGS.keys():
        raise CheckSpecError(f"regex check 'flags' must be a string of letters from 'imsx', got {flags!r}")
    bits = 0
    for f in flags:
        bits |= _REGEX_FLAGS[f]
    try:
        return re.compile(pattern, bits)
    except re.error as e:
        raise CheckSpecError(f"regex check 'pattern' does not compile: {e}") from None


def _compile_schema(spec: Mapping[str, Any]) -> jsonschema.protocols.Validator:
    schema = spec["schema"]
    if not isinstance(schema, (Mapping, bool)):
        raise CheckSpecError("json_schema check 'schema' must be a JSON Schema object")
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as e:
        raise CheckSpecError(f"json_schema check 'schema' is not a valid JSON Schema: {e.message}") from None
    return cls(schema)


_PYTHON_TARGET = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*")


def _compile_python(spec: Mapping[str, Any]) -> None:
    """Check the target's form only: importing it would run a stranger's code while merely loading a workload."""
    target = spec["function"]
    if not isinstance(target, str) or not _PYTHON_TARGET.fullmatch(target):
        raise CheckSpecError(f"python check 'function' must look like 'package.module:function', got {target!r}")
    return None


def resolve_python_check(target: str) -> Callable[..., Any]:
    """Import `module:function` (only ever called for a run the user opted in to): a plain function defined in a
    module outside the standard library, else CheckSpecError naming why."""
    mod_name, fn_name = target.split(":")
    top = mod_name.split(".")[0]
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        raise CheckSpecError(
            f"python check {target!r} names the standard library module {top!r}; a check is a function of yours "
            "that judges the output (e.g. my_checks:is_valid_sql)"
        )
    try:
        module = importlib.import_module(mod_name)
    except Exception as e:  # ImportError, or the module itself failing to import
        raise CheckSpecError(
            f"python check cannot import module {mod_name!r} ({type(e).__name__}: {e}); is it on PYTHONPATH?"
        ) from None
    fn = getattr(module, fn_name, None)
    if not inspect.isfunction(fn):
        raise CheckSpecError(f"python check: module {mod_name!r} has no function {fn_name!r}")
    return fn


_COMPILERS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "exact": _compile_value,
    "contains": _compile_value,
    "regex": _compile_regex,
    "json_schema": _compile_schema,
    "python": _compile_python,
}


# --- run -------------------------------------------------------------------------------------------------------


def _run_exact(check: Check, text: str, item: Any) -> tuple[bool, str]:
    (want,) = check.compiled
    got = text
    if check.spec.get("strip", True):
        got, want = got.strip(), want.strip()
    if check.spec.get("ignore_case", False):
        got, want = got.casefold(), want.casefold()
    return (True, "") if got == want else (False, f"expected exactly {_clip(want)!r}, got {_clip(got)!r}")


def _run_contains(check: Check, text: str, item: Any) -> tuple[bool, str]:
    fold = check.spec.get("ignore_case", False)
    hay = text.casefold() if fold else text
    missing = [v for v in check.compiled if (v.casefold() if fold else v) not in hay]
    return (True, "") if not missing else (False, f"missing {', '.join(repr(_clip(m)) for m in missing)}")


def _run_regex(check: Check, text: str, item: Any) -> tuple[bool, str]:
    pattern: re.Pattern[str] = check.compiled
    return (True, "") if pattern.search(text) else (False, f"no match for /{_clip(pattern.pattern)}/")


def _run_json_schema(check: Check, text: str, item: Any) -> tuple[bool, str]:
    found = first_json_value(text)
    if found is None:
        return False, "no JSON object or array found in the output"
    error = jsonschema.exceptions.best_match(check.compiled.iter_errors(found))
    if error is None:
        return True, ""
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return False, f"JSON at {where}: {error.message}"


def _run_python(check: Check, text: str, item: Any) -> tuple[bool, str]:
    result = resolve_python_check(check.spec["function"])(text, item)
    if isinstance(result, tuple) and len(result) == 2:
        return bool(result[0]), str(result[1])
    if isinstance(result, bool):
        return result, ""
    raise TypeError(f"{check.spec['function']} returned {type(result).__name__}, expected bool or (bool, reason)")


_RUNNERS: dict[str, Callable[[Check, str, Any], tuple[bool, str]]] = {
    "exact": _run_exact,
    "contains": _run_contains,
    "regex": _run_regex,
    "json_schema": _run_json_schema,
    "python": _run_python,
}

# --- structured outputs: an item's `response_format`, as the request sends it -----------------------------------
# OpenAI's two JSON forms: {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}}} and
# {"type": "json_object"}; "text" asks for nothing to check.
RESPONSE_FORMAT_TYPES = ("json_schema", "json_object", "text")


def parse_response_format(value: Any) -> dict[str, Any]:
    """A workload item's `response_format`, checked where it is loaded (its schema a valid JSON Schema); CheckSpecError
    names the key and the fix."""
    if not isinstance(value, Mapping) or value.get("type") not in RESPONSE_FORMAT_TYPES:
        kinds = ", ".join(RESPONSE_FORMAT_TYPES)
        raise CheckSpecError(
            f"'response_format' must be an object whose 'type' is one of {kinds}, e.g. "
            '{"type": "json_schema", "json_schema": {"name": "answer", "schema": {...}}}'
        )
    if value["type"] == "json_schema":
        inner = value.get("json_schema")
        if not isinstance(inner, Mapping) or "schema" not in inner:
            raise CheckSpecError("'response_format' of type json_schema needs 'json_schema': {name, schema}")
        _compile_schema({"type": "json_schema", "schema": inner["schema"]})  # its message names the schema
    return dict(value)


def structured_output(text: str, response_format: Mapping[str, Any]) -> CheckResult | None:
    """Does the whole output (whitespace around it aside) satisfy the item's `response_format`: one JSON value, an
    object for json_object, valid against the schema for json_schema. Stricter than the `json_schema` check, which
    finds JSON anywhere in a text: an engine that honours the format sends nothing else. None: nothing to check."""
    kind = response_format.get("type")
    if kind not in ("json_schema", "json_object"):
        return None
    try:
        value = json.loads(text)
    except ValueError as e:  # JSONDecodeError, and numbers of more digits than Python converts
        return CheckResult("response_format", False, f"not JSON: {_clip(str(e))}")
    if kind == "json_object":
        ok = isinstance(value, dict)
        return CheckResult("response_format", ok, "" if ok else f"a JSON {type(value).__name__}, not an object")
    validator = _compile_schema({"type": "json_schema", "schema": response_format["json_schema"]["schema"]})
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return CheckResult("response_format", True)
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return CheckResult("response_format", False, f"JSON at {where}: {_clip(error.message)}")


_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n(.*?)```", re.DOTALL)


def first_json_value(text: str) -> Any:
    """The first JSON object or array in `text`: fenced ```json blocks first, then the first one that parses."""
    for block in _FENCE.findall(text):
        value = _scan_json(block)
        if value is not None:
            return value
    return _scan_json(text)


def _scan_json(text: str) -> Any:
    """Try json.raw_decode at each '{' or '[' in order; return the first object/array that decodes."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"[{\[]", text):
        try:
            value, _ = decoder.raw_decode(text, m.start())
        except json.JSONDecodeError:
            continue
        if isinstance(value, (dict, list)):
            return value
    return None


def _clip(s: str, n: int = 80) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."
