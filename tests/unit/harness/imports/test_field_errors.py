"""One grammar for every reader's field errors (issue 37: ``no `line 1: metadata` ``, ``` `the file` is not an
object ```): `<file>: read as <format>: [line N: ]<what is wrong>[; <fix>]`, naming the field by its path in the
file and never a location as a field. Each case breaks a real tool's fixture (tests/fixtures/imports) one way."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from speculab.errors import UserError
from speculab.harness.imports import aiperf_profile, guidellm_benchmarks, llmperf_responses, sglang_bench, vllm_bench
from speculab.harness.imports.registry import READERS

FIXTURES = Path(__file__).parents[3] / "fixtures" / "imports"
LP_FILE = "speculab-mock_60_16_individual_responses.json"
LP_SUMMARY = "speculab-mock_60_16_summary.json"
# a field's path in the file: keys with [i] indices joined by dots, or an entry of a file that is a list ([3].ttft_s)
FIELD = re.compile(r"[A-Za-z_][\w\-]*(\[[^\]`]+\])*(\.[A-Za-z_][\w\-]*(\[[^\]`]+\])*)*|\[\d+\](\.[A-Za-z_][\w\-]*)*")


def _json(src: Path, to: Path, change: Callable[[object], object]) -> Path:
    to.write_text(json.dumps(change(json.loads(src.read_text()))))
    return to


def _lines(src: Path, to: Path, n: int, change: Callable[[dict], object]) -> Path:
    """`src` with its line `n` (1-based) changed."""
    lines = src.read_text().splitlines()
    lines[n - 1] = json.dumps(change(json.loads(lines[n - 1])))
    to.write_text("\n".join(lines) + "\n")
    return to


def _set(d: dict, path: tuple, v: object) -> dict:
    x = d
    for k in path[:-1]:
        x = x[k]
    if v is ...:
        del x[path[-1]]
    else:
        x[path[-1]] = v
    return d


def _aiperf(tmp: Path) -> Path:
    shutil.copytree(FIXTURES / "aiperf" / "baseline", tmp / "run")
    return tmp / "run" / "profile_export.jsonl"


def _llmperf(tmp: Path) -> Path:
    shutil.copytree(FIXTURES / "llmperf" / "baseline", tmp / "run")
    return tmp / "run" / LP_FILE


VLLM, GUIDELLM, SGLANG = FIXTURES / "vllm" / "baseline.json", FIXTURES / "guidellm" / "baseline.json", None
SG = FIXTURES / "sglang" / "baseline.jsonl"

# (format, how to break a copy of its fixture: tmp -> the path to read, the file the line names, its `read as`,
#  what the line says after the `read as` part)
CASES = [
    ("vllm", lambda t: _json(VLLM, t / "r.json", lambda d: [d]), "r.json", vllm_bench.READ_AS,
     "it is a list, not an object"),
    ("vllm", lambda t: _json(VLLM, t / "r.json", lambda d: _set(d, ("ttfts",), ...)), "r.json", vllm_bench.READ_AS,
     "no `ttfts`; write it with `vllm bench serve --save-result --save-detailed`"),
    ("vllm", lambda t: _json(VLLM, t / "r.json", lambda d: _set(d, ("itls", 2, 1), "x")), "r.json",
     vllm_bench.READ_AS, "`itls[2][1]` is 'x', not a number"),
    ("guidellm", lambda t: _json(GUIDELLM, t / "g.json", lambda d: [d]), "g.json", guidellm_benchmarks.READ_AS,
     "it is a list, not an object"),
    ("guidellm", lambda t: _json(GUIDELLM, t / "g.json", lambda d: _set(d, ("benchmarks", 0, "requests"), [])),
     "g.json", guidellm_benchmarks.READ_AS, "`benchmarks[0].requests` is a list, not an object"),
    ("guidellm",
     lambda t: _json(GUIDELLM, t / "g.json", lambda d: _set(d, ("benchmarks", 0, "requests", "successful", 1), 3)),
     "g.json", guidellm_benchmarks.READ_AS, "`benchmarks[0].requests.successful[1]` is a number, not an object"),
    ("aiperf", lambda t: _lines(_aiperf(t), t / "run" / "profile_export.jsonl", 2, lambda d: [d]),
     "profile_export.jsonl", aiperf_profile.READ_AS, "line 2: it is a list, not an object"),
    ("aiperf", lambda t: _lines(_aiperf(t), t / "run" / "profile_export.jsonl", 3, lambda d: _set(d, ("metadata",), 1)),
     "profile_export.jsonl", aiperf_profile.READ_AS, "line 3: `metadata` is a number, not an object"),
    ("aiperf",
     lambda t: (_aiperf(t), _json(FIXTURES / "aiperf" / "baseline" / aiperf_profile.SIBLING, t / "run" /
                aiperf_profile.SIBLING, lambda d: _set(d, ("input_config", "phases", 0, "type"), "x")))[0],
     aiperf_profile.SIBLING, f"AIPerf's {aiperf_profile.SIBLING}",
     "`input_config.phases[0].type` is 'x', neither a concurrency nor a request rate; not read yet"),
    ("sglang", lambda t: _lines(SG, t / "s.jsonl", 1, lambda d: [d]), "s.jsonl", sglang_bench.READ_AS,
     "line 1: it is a list, not an object"),
    ("sglang", lambda t: _lines(SG, t / "s.jsonl", 1, lambda d: _set(d, ("ttfts", 4), "x")), "s.jsonl",
     sglang_bench.READ_AS, "`ttfts[4]` is 'x', not a number"),
    ("llmperf", lambda t: _json(_llmperf(t), t / "run" / LP_FILE, lambda d: [*d[:2], "x", *d[3:]]), LP_FILE,
     llmperf_responses.READ_AS, "`[2]` is a string, not an object"),
    ("llmperf", lambda t: _json(_llmperf(t), t / "run" / LP_FILE, lambda d: _set(d, (1, "ttft_s"), None)), LP_FILE,
     llmperf_responses.READ_AS, "no `[1].ttft_s`"),
    ("llmperf", lambda t: (_llmperf(t), _json(t / "run" / LP_SUMMARY, t / "run" / LP_SUMMARY, lambda d: [d]))[0],
     LP_SUMMARY, "an LLMPerf summary file", "it is a list, not an object"),
    ("llmperf",
     lambda t: (_llmperf(t), _json(t / "run" / LP_SUMMARY, t / "run" / LP_SUMMARY,
                                   lambda d: _set(d, ("num_concurrent_requests",), ...)))[0],
     LP_SUMMARY, "an LLMPerf summary file", "no `num_concurrent_requests`"),
]  # fmt: skip


@pytest.mark.parametrize(("fmt", "broken", "named", "read_as", "said"), CASES)
def test_every_readers_field_errors_have_one_grammar(tmp_path: Path, fmt, broken, named, read_as, said) -> None:
    path = broken(tmp_path)
    with pytest.raises(UserError) as e:
        READERS[fmt].read_all(path)
    msg = str(e.value)
    assert "\n" not in msg and "Traceback" not in msg
    head = next(f"{p}: read as {read_as}: " for p in (path, path.with_name(named)) if p.name == named)
    assert msg == head + said
    what = re.sub(r"^line \d+: ", "", msg.removeprefix(head)).split("; ")[0]  # the fix after "; " quotes commands
    assert not re.search(r"\bline \d+\b", what)  # a location is said once, before what is wrong
    for field in re.findall(r"`([^`]*)`", what):
        assert FIELD.fullmatch(field), f"not a field's path: `{field}` in {msg}"
