"""Recognition by positive marks (issue 51): a file is a tool's by the keys its tool writes, never by the absence of
a refusal; a file no reader claims is refused in one line naming the closest tool and what the file lacks of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speculab.errors import UserError
from speculab.harness.imports import vllm_bench
from speculab.harness.imports.marks import Marks, closest
from speculab.harness.imports.registry import result_format, result_path, summary_reader
from speculab.harness.imports.summaries import vllm

FIXTURES = Path(__file__).parents[3] / "fixtures" / "imports"
OTHER_TOOLS = FIXTURES / "recognition"
VLLM_SUMMARY = FIXTURES / "summaries" / "vllm" / "baseline" / "r1.json"


@pytest.mark.parametrize(
    ("name", "tool"), [("draftbench.json", "draftbench"), ("profile_export_genai_perf.json", "GenAI-Perf")]
)
def test_another_tools_json_with_a_backend_is_not_a_vllm_file(name: str, tool: str) -> None:
    path = OTHER_TOOLS / name
    assert not vllm_bench.detect(path) and not vllm.detect(path)
    reader = summary_reader(path)
    assert reader is None or reader.TOOL not in (vllm_bench.TOOL, "vllm bench sweep serve")
    try:
        fmt = result_format(path)
    except UserError as e:  # no reader of the tool registered: refused, naming it
        assert tool in str(e) and "vllm bench serve" not in str(e)
    else:  # its own reader, once registered, claims it first
        assert fmt not in ("vllm", "vllm-sweep")


def test_vllm_files_of_every_release_keep_their_marks() -> None:
    s = FIXTURES / "summaries"
    files = [*s.glob("vllm/*/*.json"), *s.glob("vllm-0.6.3/*.json"), *s.glob("sweep/*/run=*.json")]
    files += [*(FIXTURES / "vllm").glob("*.json"), *(FIXTURES / "vllm-sweep").rglob("run=*.json")]
    assert len(files) > 15
    assert all(vllm_bench.detect(f) for f in files), [f for f in files if not vllm_bench.detect(f)]


def test_a_vllm_file_without_its_counts_is_refused_naming_vllm_and_the_missing_marks(tmp_path: Path) -> None:
    d = json.loads(VLLM_SUMMARY.read_text())
    del d["completed"], d["num_prompts"]
    path = tmp_path / "half.json"
    path.write_text(json.dumps(d))
    assert not vllm_bench.detect(path)
    with pytest.raises(UserError) as e:
        result_format(path)
    msg = str(e.value)
    assert "closest is vllm bench serve" in msg and "no `num_prompts`, `completed`" in msg and "\n" not in msg


def test_aggregates_alone_name_the_per_request_file_beside_them(tmp_path: Path) -> None:
    aiperf = FIXTURES / "aiperf" / "baseline" / "profile_export_aiperf.json"
    with pytest.raises(UserError, match=r"AIPerf's aggregates.*give AIPerf's per-request records beside it"):
        result_format(aiperf)
    llmperf = next((FIXTURES / "llmperf" / "baseline").glob("*_summary.json"))  # read per request: its responses
    with pytest.raises(UserError, match=r"LLMPerf's summary.*give LLMPerf's \*_individual_responses.json beside it"):
        result_format(llmperf)


def test_closest_needs_two_marks_and_prefers_the_larger_share(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"date": 1, "backend": "x", "other": 2}))
    one, two = Marks("one", ("date", "nothing")), Marks("two", ("date", "backend", "num_prompts"))
    found = closest(path, (one, two))
    assert found is not None and found[0] is two and found[2] == ("num_prompts",)
    path.write_text(json.dumps({"date": 1}))
    assert closest(path, (one, two)) is None
    path.write_text("not json")
    assert closest(path, (one, two)) is None


def test_a_directory_of_aggregates_alone_names_the_per_request_file(tmp_path: Path) -> None:
    art = tmp_path / "artifacts" / "plain"
    art.mkdir(parents=True)
    (art / "profile_export_aiperf.json").write_text(
        (FIXTURES / "aiperf" / "baseline" / "profile_export_aiperf.json").read_text()
    )
    with pytest.raises(UserError, match=r"profile_export_aiperf.json: AIPerf's aggregates.*profile_export.jsonl"):
        result_path(tmp_path / "artifacts")
