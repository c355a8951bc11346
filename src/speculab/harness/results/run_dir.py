"""A run on disk: manifest.json (what was run), requests.jsonl (one record per finished request, appended and
flushed as each finishes, so a crash loses nothing that finished) and summary.json (every number, seconds).

What goes into summary.json is `speculab.commands.bench.summary`'s business; this module only lays the files out, and
writes summary.json the way every kind's is written (`summary_file.write_summary_file`).
"""

from __future__ import annotations

import platform
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from speculab import NAME, __version__
from speculab.harness.records import RequestRecord
from speculab.harness.results.output_dir import check_output_dir
from speculab.harness.results.requests_file import RequestsFile, write_error
from speculab.harness.results.strict_json import write_json_atomic
from speculab.harness.results.summary_file import SUMMARY_FILE, write_summary_file

# /2: `server_gone` is a record (kind server_gone, the client's evidence as fields; the report words it), where /1
# wrote the sentence (`ReportWarning.from_dict` reads either)
MANIFEST_SCHEMA = "speculab.bench.manifest/2"
MANIFEST, REQUESTS, SUMMARY = "manifest.json", "requests.jsonl", SUMMARY_FILE


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def versions() -> dict[str, Any]:
    import aiohttp
    import numpy

    return {
        NAME: __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "aiohttp": aiohttp.__version__,
        "numpy": numpy.__version__,
    }


class RunDir:
    """The output directory of one bench (or diagnose) run. Refuses a directory that already holds a run."""

    def __init__(self, path: Path):
        self.path = path
        self._requests: RequestsFile | None = None

    @staticmethod
    def check(path: Path) -> None:
        """Fail before any load if the directory cannot be used."""
        check_output_dir(path)

    def create(self) -> RunDir:
        self.check(self.path)
        self._requests = RequestsFile(self.path / REQUESTS)
        return self

    def write_json(self, name: str, obj: dict[str, Any]) -> None:
        """Atomic: write a temporary file, then rename over the target."""
        try:
            write_json_atomic(self.path / name, obj)
        except OSError as e:
            raise write_error(self.path / name, e) from None

    def write_summary(self, summary: dict[str, Any]) -> None:
        """summary.json through the one writer of every kind's (indented by 2, as bench's always was)."""
        try:
            write_summary_file(self.path, summary, indent=2)
        except OSError as e:
            raise write_error(self.path / SUMMARY, e) from None

    def append(self, rec: RequestRecord) -> None:
        assert self._requests is not None, "create() first"
        self._requests.append(rec)

    def close(self) -> None:
        if self._requests is not None:
            self._requests.close()
            self._requests = None
