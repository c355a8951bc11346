"""The registry: every reader has the same face, and a path's format is detected in one order (directories first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from speculab.errors import UserError
from speculab.harness.imports.registry import FORMATS, READERS, read_runs, result_format

FIXTURES = Path(__file__).parents[3] / "fixtures" / "imports"


def test_every_reader_has_the_face_and_the_format_names_users_were_promised() -> None:
    assert FORMATS == ("speculab", "vllm", "vllm-sweep", "guidellm", "aiperf", "sglang", "llmperf")
    for name, reader in READERS.items():
        assert name == reader.FORMAT and reader.TOOL and reader.NAME
        assert callable(reader.detect) and callable(reader.read_all)


def test_detection_asks_the_directories_readers_first(tmp_path: Path) -> None:
    assert result_format(FIXTURES / "vllm-sweep" / "sweep" / "SERVE--spec") == "vllm-sweep"  # a prefix, no directory
    assert result_format(tmp_path) == "speculab"
    assert result_format(FIXTURES / "vllm" / "baseline.json") == "vllm"
    assert result_format(FIXTURES / "guidellm" / "baseline.json") == "guidellm"
    with pytest.raises(UserError, match=r"no such file or directory; give a `speculab bench` output directory"):
        result_format(tmp_path / "nope.json")


def test_a_file_of_several_runs_reads_all_or_the_one_picked() -> None:
    sweep = FIXTURES / "guidellm" / "sweep-baseline.json"
    runs = read_runs(sweep, "guidellm")
    assert len(runs) > 1
    assert read_runs(sweep, "guidellm", 1)[0].level == runs[1].level
    assert len(read_runs(FIXTURES / "vllm" / "baseline.json", "vllm", 1)) == 1  # one run: nothing to pick
