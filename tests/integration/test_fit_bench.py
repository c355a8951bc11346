"""`speculab bench` fits its workload to the server's context before the first request (workload.fit), against
the mock with a 512-token context: skip (the default) sends --num-prompts that fit, recorded in the manifest; refuse
stops before anything is sent; compare pairs two fitted runs on the prompts they sent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.fakes.words import words

from speculab.commands.bench.options import BenchFlags, bench_config_from_flags
from speculab.commands.bench.run import run_bench
from speculab.commands.compare.pairing import inputs_from_bench_dirs
from speculab.errors import UserError
from speculab.mock.script import MockConfig
from speculab.mock.server import mock_server_in_thread

FLAGS = {"workload": "builtin:grounded", "num_prompts": 12, "concurrency": 4, "max_tokens": 32, "timeout": 60.0}


def _bench(url: str, out: Path, **flags: object) -> dict:
    cfg, items, count = bench_config_from_flags(BenchFlags(**{**FLAGS, "url": url, "output": out, **flags}))  # type: ignore[arg-type]
    return asyncio.run(run_bench(cfg, items, count_tokens=count)).summary


def test_skip_cap_refuse_against_a_small_context(tmp_path: Path) -> None:
    mock = MockConfig(ttft_s=0.002, gap_s=0.001, output_tokens=8, max_model_len=512)
    with mock_server_in_thread(mock) as url:
        summary = _bench(url, tmp_path / "a")
        assert summary["counts"]["sent"] == 12 and summary["counts"]["error"] == 0
        manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
        fit = manifest["fit"]
        assert fit["context"] == 512 and fit["policy"] == "skip" and fit["left_out"]
        assert manifest["workload"]["n_items"] == 12
        assert any("prompts were left out" in w for w in words(summary["warnings"]))
        _bench(url, tmp_path / "b")
        inputs = inputs_from_bench_dirs(tmp_path / "a", tmp_path / "b")
        assert len(inputs.setup.items) == 12 and not {it.prompt_id for it in inputs.setup.items} & set(fit["left_out"])
        assert any("prompts were left out" in n for n in words(inputs.notes))
        with pytest.raises(UserError, match=r"cannot be paired: .*fit\.left_out"):  # another context left out others
            _bench(url, tmp_path / "c", max_model_len=1024)
            inputs_from_bench_dirs(tmp_path / "a", tmp_path / "c")
        with pytest.raises(UserError, match=r"prompts cannot fit the 512-token context"):
            _bench(url, tmp_path / "d", fit="refuse")
        assert not (tmp_path / "d").exists()  # refused before the run directory, before any request
        capped = _bench(url, tmp_path / "e", fit="cap", max_tokens=256)
        assert capped["counts"]["error"] == 0
        assert json.loads((tmp_path / "e" / "manifest.json").read_text())["fit"]["capped"] > 0
