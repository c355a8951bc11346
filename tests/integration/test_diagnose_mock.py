"""speculab diagnose against the scripted mock server: known prefill cost per prompt token, cold-start delay and
decode gap are recovered within 10% (issue 6), and the top finding is right in each of the four situations.

Each scenario is a fresh mock process (its own event loop and CPU, as a real server; and cold, as a new server is),
kept small: short gaps, a 1024-token context, a few requests per phase. The 10% tolerances are the issue's; the
tests that hold a measured time to them run alone, in test_diagnose_mock_timing.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from integration.mock_process import mock_process
from speculab.commands.diagnose.config import DiagnoseConfig
from speculab.commands.diagnose.run import run_diagnosis
from speculab.harness.client.endpoint import EndpointConfig, RequestSampling
from speculab.harness.results.warnings import ReportWarning
from speculab.report.phrases import warning_text
from speculab.report.words import disaggregation_text, finding_words

FAST = dict(sweep_points=5, sweep_repeats=2, prefix_tokens=200, prefix_repeats=2, warm_probes=3, probe_seed=7)


async def diagnose(url: str, out: Path | None = None, **over: Any):
    opts: dict[str, Any] = dict(FAST)
    opts.update(
        workload=over.pop("workload", "synthetic:input=64,output=16"),
        num_prompts=over.pop("num_prompts", 3),
        sampling=RequestSampling(max_tokens=over.pop("max_tokens", 16)),
    )
    opts.update(over)
    cfg = DiagnoseConfig(endpoint=EndpointConfig(base_url=url, model=""), output_dir=out, **opts)
    return await run_diagnosis(cfg)


def next_step(finding: Any) -> str:
    """A finding's next step, in the report's words."""
    return finding_words(finding.to_dict()).next_step


def within(x: float, truth: float, rel: float = 0.10) -> bool:
    return abs(x - truth) <= rel * truth


async def test_decode_dominated() -> None:
    with mock_process(
        ttft_s=0.02, gap_s=0.01, output_tokens=32, prefill_s_per_token=0.00002, max_model_len=1024
    ) as url:
        res = await diagnose(url, concurrency=2, workload="synthetic:input=64,output=32", max_tokens=32)
    d = res.diagnosis
    assert d.findings[0].cause == "decode", d.findings
    assert d.decode is not None and d.decode.decode_share > 0.8
    assert "speculab run" in next_step(d.findings[0])
    assert not d.cold_start.detected and not d.disaggregation
    assert "cold_start" not in [f.cause for f in d.findings] and "queueing" not in [f.cause for f in d.findings]


async def test_queueing_dominated_and_no_disaggregation_for_slot_waits() -> None:
    with mock_process(ttft_s=0.01, gap_s=0.006, output_tokens=16, max_concurrency=1, max_model_len=1024) as url:
        res = await diagnose(url, concurrency=4)
    d = res.diagnosis
    assert d.findings[0].cause == "queueing", d.findings
    q = d.queueing
    assert q.measured and q.wait_s is not None and q.wait_s > 0.2
    assert q.server_queue_s is not None and q.server_queue_s > 0.5 * q.wait_s  # the server says: waiting for a slot
    assert not q.interference and not d.disaggregation  # capacity, not prefill/decode interference
    assert "capacity" in next_step(d.findings[0])


@pytest.mark.paced  # queueing read against the mock's serial prefill: in the idle background, a starved client
# read it otherwise once on the slow VM (2026-12-07)
async def test_prefill_decode_interference_suggests_disaggregation_with_its_cost() -> None:
    # one prefill at a time: under load each request waits for the others' prefills, while decode stays steady
    script = dict(ttft_s=0.01, gap_s=0.004, output_tokens=4, prefill_s_per_token=0.0004, serial_prefill=True,
                  max_model_len=1024)  # fmt: skip
    with mock_process(**script) as url:
        res = await diagnose(url, concurrency=4, workload="synthetic:input=400,output=4", max_tokens=4,
                             max_prompt_tokens=500)  # fmt: skip
    d = res.diagnosis
    q = d.queueing
    assert q.interference, q
    said = disaggregation_text(res.document)  # the suggestion with its cost, in the report's words
    assert d.disaggregation and said is not None
    assert "transfer" in said and "rout" in said


async def test_prefix_caching_detected_and_saving_measured() -> None:
    script = dict(ttft_s=0.01, gap_s=0.004, output_tokens=4, prefill_s_per_token=0.0005, prefix_cache=True,
                  max_model_len=1024)  # fmt: skip
    with mock_process(**script) as url:
        res = await diagnose(url, workload="synthetic:input=100,output=4", max_tokens=4, prefix_tokens=400)
    pc = res.diagnosis.prefix_caching
    assert pc.enabled is True, pc
    # the mock caches whole 16-token blocks of the prefix: nearly all of the expected saving
    assert pc.saving_s is not None and pc.expected_saving_s is not None
    assert 0.8 * pc.expected_saving_s <= pc.saving_s <= 1.1 * pc.expected_saving_s
    assert pc.server_cache_hit_tokens is not None and pc.server_cache_hit_tokens >= 300


@pytest.mark.parametrize("bad", [{"sweep_points": 2}, {"concurrency": 0}, {"idle_s": -1.0}])
def test_bad_options_fail_before_anything(bad: dict[str, Any]) -> None:
    from speculab.errors import UserError

    with pytest.raises(UserError):
        DiagnoseConfig(endpoint=EndpointConfig(base_url="http://127.0.0.1:9", model=""), **bad)


async def test_default_workload_leaves_out_prompts_too_long_for_a_small_context(tmp_path: Path) -> None:
    """With no --workload, built-in prompts that cannot fit a 512-token context are skipped, and the run says so;
    a workload the user names is refused instead (it is theirs to fix)."""
    from speculab.errors import UserError

    with mock_process(ttft_s=0.005, gap_s=0.002, output_tokens=16, max_model_len=512) as url:
        res = await diagnose(url, tmp_path / "d", workload="builtin:mixed", workload_default=True, num_prompts=4,
                             max_tokens=16)  # fmt: skip
        said = [warning_text(ReportWarning.from_dict(w)) for w in res.document["warnings"]]
        note = [w for w in said if "built-in prompts too long" in w]
        assert note and "512-token context" in note[0], said
        assert res.document["options"]["workload_left_out"] > 0
        wl = [r for r in res.records if r.extra.get("phase") == "workload-c1"]
        assert len(wl) == 4 and all(r.ok for r in wl)
        with pytest.raises(UserError, match="the context is 512"):
            await diagnose(url, None, workload="builtin:mixed", num_prompts=227, max_tokens=16)


def test_synthetic_token_ratio_from_probe_usage() -> None:
    from speculab.commands.diagnose.run import synthetic_token_ratio
    from speculab.harness.records import RequestRecord

    def rec(tokens: int | None, ok: bool = True) -> RequestRecord:
        from speculab.harness.records import ErrorCategory, ErrorInfo

        err = None if ok else ErrorInfo(ErrorCategory.HTTP, "HTTP 500", 500)
        return RequestRecord(0, 0.0, 0.0, 1.0, prompt_tokens=tokens, error=err)

    assert synthetic_token_ratio([rec(48), rec(50), rec(47), rec(None), rec(900, ok=False)], 32) == 48 / 32
    assert synthetic_token_ratio([rec(None)], 32) == 1.0  # no usage: sized as before
    assert synthetic_token_ratio([rec(1000)], 32) == 4.0  # clipped


def test_fitting_items_cycle_up_to_num_prompts_with_their_own_seeds() -> None:
    from speculab.commands.diagnose.run import _fitting_items
    from speculab.harness.records import RequestSpec
    from speculab.harness.workload.items import request_seed

    items = tuple(RequestSpec(i, prompt=("word " * (400 if i % 2 else 10)).strip(), seed=99) for i in range(6))
    cfg = DiagnoseConfig(endpoint=EndpointConfig(base_url="http://x", model=""), num_prompts=7, seed=3,
                         sampling=RequestSampling(max_tokens=16))  # fmt: skip
    chosen, left_out = _fitting_items(items, 512, cfg)
    assert left_out == 3 and len(chosen) == 7
    assert [c.prompt for c in chosen] == [items[i % 3 * 2].prompt for i in range(7)]  # items 0, 2, 4, 0, ...
    assert [c.index for c in chosen] == list(range(7)) and [c.seed for c in chosen] == [
        request_seed(3, i) for i in range(7)
    ]
