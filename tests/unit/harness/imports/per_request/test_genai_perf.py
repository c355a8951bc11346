"""GenAI-Perf / perf_analyzer profile_export.json -> ImportedRuns: the fixtures (perf_analyzer's layout, scripted
timings: tests/fixtures/imports/genai-perf/README.md) and small in-test exports: every chunk at its own timestamp,
requests in the order sent, splintered SSE events, failed requests, loads, one-line errors, positive detection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from speculab.errors import UserError
from speculab.harness.analysis.metrics import request_metrics
from speculab.harness.imports import registry
from speculab.harness.imports.per_request import genai_perf
from speculab.harness.records import ErrorCategory
from speculab.harness.results.warnings import WarningKind as Kind

FIX = Path(__file__).resolve().parents[4] / "fixtures" / "imports"
GP = FIX / "genai-perf"


def _sse(data: dict | str) -> dict:
    return {"response": f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"}


def _text(t: str) -> dict:
    return _sse({"choices": [{"index": 0, "delta": {"content": t}}]})


def _req(sent_ms: float, texts: list[str], prompt: str = "hi", gap_ms: float = 10.0, usage: int | None = 3) -> dict:
    base = 10**18
    sent = base + int(sent_ms * 1e6)
    times = [sent + int((20 + k * gap_ms) * 1e6) for k in range(len(texts))]
    outs = [_text(t) for t in texts]
    if usage is not None:
        times.append(times[-1] + 1)
        outs.append(_sse({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": usage}}))
    payload = json.dumps({"messages": [{"role": "user", "content": prompt}], "max_tokens": 8, "model": "m"})
    return {"timestamp": sent, "request_inputs": {"payload": payload}, "response_timestamps": times,
            "response_outputs": outs}  # fmt: skip


def _write(tmp_path: Path, requests: list[dict], mode: str = "concurrency", value: float = 2, **top) -> Path:
    doc = {"experiments": [{"experiment": {"mode": mode, "value": value}, "requests": requests}]}
    doc |= {"version": "2.59.0", "service_kind": "openai", "endpoint": "v1/chat/completions"} | top
    f = tmp_path / "run" / "profile_export.json"
    f.parent.mkdir(exist_ok=True)
    f.write_text(json.dumps(doc))
    return f


def test_the_fixtures_keep_every_chunk_at_its_own_time() -> None:
    (a,) = genai_perf.read_all(GP / "baseline" / "profile_export.json")
    (b,) = genai_perf.read_all(GP / "candidate" / "profile_export.json")
    assert a.level.key == b.level.key == "c2" and len(a.records) == len(b.records) == 16
    ra, rb = a.records[0], b.records[0]
    assert len(ra.chunks) == 16 and len(rb.chunks) == 8  # the role and usage chunks carry no text
    gaps_a = [y.t_s - x.t_s for x, y in zip(ra.chunks, ra.chunks[1:], strict=False)]
    assert gaps_a == pytest.approx([0.030] * 15, abs=1e-6) and rb.chunks[1].t_s - rb.chunks[0].t_s == pytest.approx(
        0.042857, abs=1e-6
    )
    assert [c.text for c in rb.chunks[:2]] == [" tok tok", " tok tok"]
    assert ra.completion_tokens == 16 and ra.prompt_tokens is None  # no usage: max_tokens, ended for its length
    assert request_metrics(ra).tpot_s == pytest.approx(0.030, abs=1e-6)
    assert request_metrics(rb).tpot_s == pytest.approx(0.020, abs=1e-4)
    assert a.items[3].messages == ({"role": "user", "content": genai_perf_prompt(3)},) and a.items[3].max_tokens == 16
    assert a.model == "speculab-mock" and a.name == "baseline" and a.started_utc.startswith("2025-12-05")
    assert a.info["version"] == "2.59.0"


def genai_perf_prompt(i: int) -> str:
    return f"Write a short note about speculative decoding, part {i}."


def test_requests_go_in_the_order_they_were_sent(tmp_path: Path) -> None:
    f = _write(tmp_path, [_req(50, ["a"], "second"), _req(0, ["a", "b"], "first")])  # listed as they completed
    (run,) = genai_perf.read_all(f)
    assert [i.messages[0]["content"] for i in run.items] == ["first", "second"]
    assert run.records[0].sent_s == 0.0 and run.records[1].sent_s == pytest.approx(0.05)


def test_a_splintered_event_is_one_chunk_when_its_rest_arrives(tmp_path: Path) -> None:
    r = _req(0, ["a", "b"], usage=None)
    whole = r["response_outputs"][1]["response"]
    r["response_outputs"][1:2] = [{"response": whole[:12]}, {"response": whole[12:]}]
    r["response_timestamps"].append(r["response_timestamps"][-1] + 5_000_000)
    (run,) = genai_perf.read_all(_write(tmp_path, [r]))
    rec = run.records[0]
    assert [c.text for c in rec.chunks] == ["a", "b"] and rec.completion_tokens is None
    assert rec.chunks[1].t_s == pytest.approx(0.035)  # when its rest arrived


@pytest.mark.parametrize(("finish", "tokens"), [("length", 8), ("stop", None), (None, None)])
def test_without_usage_the_output_is_max_tokens_only_where_it_ended_for_its_length(
    tmp_path: Path, finish: str | None, tokens: int | None
) -> None:
    r = _req(0, ["a", "b"], usage=None)
    last = {"choices": [{"index": 0, "delta": {"content": "b"}, "finish_reason": finish}]}
    r["response_outputs"][-1] = _sse(last)
    (run,) = genai_perf.read_all(_write(tmp_path, [r]))
    assert run.records[0].completion_tokens == tokens  # the payload's max_tokens is 8


def test_a_request_without_responses_or_with_an_error_event_failed(tmp_path: Path) -> None:
    silent = _req(0, ["a"]) | {"response_timestamps": [], "response_outputs": []}
    refused = _req(5, ["a"])
    refused["response_outputs"][0] = _sse({"error": {"message": "server busy", "code": 503}})
    (run,) = genai_perf.read_all(_write(tmp_path, [silent, refused, _req(9, ["ok"])]))
    assert [r.error is not None for r in run.records] == [True, True, False]
    assert "no response recorded" in run.records[0].error.message
    assert "server busy" in run.records[1].error.message and run.records[1].error.category is ErrorCategory.HTTP


def test_each_experiment_is_a_load(tmp_path: Path) -> None:
    f = _write(tmp_path, [_req(0, ["a"])], mode="request_rate", value=4)
    doc = json.loads(f.read_text())
    doc["experiments"].append({"experiment": {"mode": "concurrency", "value": 8}, "requests": [_req(0, ["a"])]})
    f.write_text(json.dumps(doc))
    runs = genai_perf.read_all(f)
    assert [r.level.key for r in runs] == ["r4", "c8"] and registry.by_load((genai_perf.FORMAT,))


def test_tritons_kind_reads_each_response_as_a_chunk(tmp_path: Path) -> None:
    r = {"timestamp": 10**18, "request_inputs": {"text_input": "hi"}, "response_timestamps": [10**18 + 10**7,
         10**18 + 3 * 10**7], "response_outputs": [{"text_output": "a"}, {"text_output": "b"}]}  # fmt: skip
    (run,) = genai_perf.read_all(_write(tmp_path, [r], service_kind="triton", endpoint=""))
    assert [c.text for c in run.records[0].chunks] == ["a", "b"] and run.items == ()


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ({"experiments": []}, "`experiments` is not a list of experiments"),
        ({"experiments": [{"experiment": {"mode": "x", "value": 1}, "requests": [{"timestamp": 1}]}]}, "mode` is 'x'"),
        ({"experiments": [{"experiment": {"mode": "concurrency", "value": 1}, "requests": []}]}, "holds no requests"),
        (
            {"experiments": [{"experiment": {"mode": "concurrency", "value": 1}, "requests": [{"timestamp": 1.5}]}]},
            "`experiments[0].requests[0].timestamp` is 1.5, not a timestamp in nanoseconds",
        ),
    ],
)
def test_a_file_it_cannot_read_is_one_line(tmp_path: Path, doc: dict, says: str) -> None:
    f = tmp_path / "profile_export.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(UserError, match="read as a GenAI-Perf / perf_analyzer profile export: ") as e:
        genai_perf.read_all(f)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_it_is_claimed_by_its_own_marks_and_claims_no_other_tools_file(tmp_path: Path) -> None:
    assert registry.result_format(GP / "baseline" / "profile_export.json") == "genai-perf"
    assert registry.result_path(GP / "baseline") == GP / "baseline" / "profile_export.json"
    others = [p for p in FIX.rglob("*.json*") if "genai-perf" not in p.parts]
    assert others and not [p for p in others if genai_perf.detect(p)]
    aggregate = tmp_path / "profile_export_genai_perf.json"  # GenAI-Perf's own aggregates: not the export
    aggregate.write_text(json.dumps({"request_latency": {"unit": "ms", "avg": 1.0}, "input_config": {}}))
    assert not genai_perf.detect(aggregate)


def test_ignore_eos_in_every_payload_is_said_to_make_acceptance_not_the_users(tmp_path: Path) -> None:
    reqs = [_req(0, ["a"]), _req(5, ["b"])]
    (plain,) = genai_perf.read_all(_write(tmp_path, reqs))
    for r in reqs:
        r["request_inputs"]["payload"] = json.dumps(json.loads(r["request_inputs"]["payload"]) | {"ignore_eos": True})
    (ignored,) = genai_perf.read_all(_write(tmp_path, reqs))
    kinds = [[n.kind for n in run.notes if not isinstance(n, str)] for run in (plain, ignored)]
    assert Kind.ACCEPTANCE_IGNORE_EOS not in kinds[0] and Kind.ACCEPTANCE_IGNORE_EOS in kinds[1]
