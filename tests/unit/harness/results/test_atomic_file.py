"""The one atomic writer: a reader sees the old file or the new one, never half of one, and a full disk leaves no
temporary file and an error naming the target."""

import errno
import os

import pytest

from fakes.full_disk import SIZE, injected_full_disk, small_disk
from speculab.harness.results.atomic_file import write_atomic
from speculab.harness.results.strict_json import write_json_atomic


def test_writes_and_replaces_leaving_nothing_beside(tmp_path):
    path = tmp_path / "summary.json"
    write_atomic(path, "old")
    write_json_atomic(path, {"a": 1})
    assert path.read_text() == '{\n  "a": 1\n}\n'
    assert os.listdir(tmp_path) == ["summary.json"]


def test_a_new_file_gets_the_umask_s_mode_like_open(tmp_path):
    write_atomic(tmp_path / "a", b"x")
    (tmp_path / "b").write_bytes(b"x")
    assert (tmp_path / "a").stat().st_mode == (tmp_path / "b").stat().st_mode


@pytest.mark.parametrize("disk", [small_disk, injected_full_disk])
def test_a_full_disk_keeps_the_old_file_whole_and_names_the_target(tmp_path, monkeypatch, disk):
    with disk(tmp_path / "small", monkeypatch) as small:
        path = small / "report.html"
        write_atomic(path, "the old report")
        with pytest.raises(OSError) as e:
            write_atomic(path, "x" * (SIZE + 1))  # more than the whole disk holds
        assert e.value.errno == errno.ENOSPC and e.value.filename == str(path)
        assert path.read_text() == "the old report"
        assert os.listdir(small) == ["report.html"]  # the temporary file that filled the disk is gone
