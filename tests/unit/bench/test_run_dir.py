import json
import math

import pytest

from fakes.scripted_openai import FakeServer, Reply, serve
from speculab.errors import EndpointError, UserError
from speculab.harness.analysis.metrics import StallConfig, aggregate
from speculab.harness.client.endpoint import EndpointConfig
from speculab.harness.client.probe import ServerInfo, choose_model, probe_endpoint
from speculab.harness.client.request import make_session
from speculab.harness.records import ChunkEvent, RequestRecord
from speculab.harness.results.requests_file import read_records
from speculab.harness.results.run_dir import RunDir, build_summary, redact_argv
from speculab.harness.results.strict_json import json_safe
from speculab.harness.servers.process import free_port
from speculab.report.console.bench import bench_renderable


def test_redact_argv():
    argv = ["speculab", "bench", "--api-key", "sk-1", "--api-key=sk-2", "--url", "http://h"]
    assert redact_argv(argv) == ["speculab", "bench", "--api-key", "***", "--api-key=***", "--url", "http://h"]


def test_json_safe():
    assert json_safe({"a": math.nan, "b": [1.0, math.inf], "c": (2,)}) == {"a": None, "b": [1.0, None], "c": [2]}


def test_run_dir_streams_records_and_survives_a_torn_line(tmp_path):
    rd = RunDir(tmp_path / "run").create()
    r = RequestRecord(0, 0.0, 0.1, 0.5, chunks=(ChunkEvent(0.2, "hé", 1),), completion_tokens=1)
    rd.append(r)
    # flushed at once: readable before close
    assert read_records(tmp_path / "run" / "requests.jsonl") == [r]
    with (tmp_path / "run" / "requests.jsonl").open("a") as f:
        f.write('{"index": 1, "sched')  # the process died mid-write
    assert read_records(tmp_path / "run" / "requests.jsonl") == [r]
    rd.close()
    with pytest.raises(UserError, match="already holds a run"):
        RunDir(tmp_path / "run").create()
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="is a file"):
        RunDir.check(tmp_path / "file")
    # a directory below a file: os.access says the parent is writable, mkdir still fails -> one line, no traceback
    with pytest.raises(UserError, match="cannot create it"):
        RunDir(tmp_path / "file" / "run").create()


def test_summary_is_strict_json_even_when_empty():
    s = build_summary(
        aggregate([]),
        run={},
        load={"rate_rps": 5.0},
        stall=StallConfig(),
        warmup_requests=0,
        spec_decode=None,
        spec_decode_note="no metrics",
        metrics_scraped=False,
        interrupted=True,
    )
    text = json.dumps(json_safe(s), allow_nan=False)
    back = json.loads(text)
    assert back["counts"]["sent"] == 0 and back["metrics"]["ttft_s"]["p50"] is None
    assert any("interrupted" in w for w in back["warnings"])
    bench_renderable(json_safe(s))  # renders without numbers


async def test_probe_lists_models_and_rejections():
    fake = FakeServer(lambda b: Reply(200, b"{}"), models=("a", "b"))
    async with serve(fake) as url, make_session() as session:
        info = await probe_endpoint(session, EndpointConfig(url, "a"))
    assert info.models == ("a", "b") and info.version is None
    with pytest.raises(EndpointError, match="served: a, b"):
        choose_model("c", info, url)
    assert choose_model(None, ServerInfo(("only",), ()), url) == "only"
    async with make_session() as session:
        with pytest.raises(EndpointError, match="cannot reach"):
            await probe_endpoint(session, EndpointConfig(f"http://127.0.0.1:{free_port()}", "a"))


def test_hints_name_the_flag_for_rejected_options():
    from speculab.harness.records import ErrorCategory, ErrorInfo
    from speculab.harness.results.run_dir import request_option_hints

    def rejected(msg):
        return RequestRecord(0, 0.0, 0.0, 0.1, error=ErrorInfo(ErrorCategory.HTTP, f"HTTP 400: {msg}", 400))

    assert "--no-continuous-usage" in request_option_hints([rejected("unknown field continuous_usage_stats")])[0]
    assert "--no-include-usage" in request_option_hints([rejected("stream_options not supported")])[0]
    assert request_option_hints([]) == []
    missing = RequestRecord(0, 0.0, 0.0, 0.1, error=ErrorInfo(ErrorCategory.HTTP, "HTTP 404: Not Found", 404))
    assert request_option_hints([missing, missing]) == [
        "2 requests got HTTP 404/405: the server may not serve this endpoint; try the other --api (completions | chat)"
    ]


def test_a_full_disk_is_one_line_naming_the_file(tmp_path):
    import errno

    class FullDisk:
        def write(self, _text):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            pass

        def close(self):
            pass

    rd = RunDir(tmp_path / "run").create()
    rd._requests._f.close()  # the one requests.jsonl writer (results.requests_file) behind RunDir
    rd._requests._f = FullDisk()
    with pytest.raises(UserError, match=r"cannot write .*requests\.jsonl \(No space left on device\); the run stopped"):
        rd.append(RequestRecord(0, 0.0, 0.0, 0.1))
    rd.close()
