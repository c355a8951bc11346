"""A disk that refuses a write is one line naming the file and the fix, exit 2; any other OSError is left alone."""

import errno

import pytest

from speculab.errors import disk_error


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS])
def test_a_refused_write_names_the_file_and_the_fix(code):
    why = disk_error(OSError(code, "refused", "/out/summary.json"))
    assert why is not None and why.exit_code == 2
    assert str(why).startswith("cannot write /out/summary.json (refused); ") and "--resume" in str(why)
    assert "\n" not in str(why)


def test_other_errors_are_not_taken_for_a_full_disk():
    assert disk_error(OSError(errno.ECONNRESET, "reset")) is None
    assert "the output" in str(disk_error(OSError(errno.ENOSPC, "No space left on device")))
