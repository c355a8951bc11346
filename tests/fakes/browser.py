"""A page in headless Chromium over the DevTools protocol (`--remote-debugging-pipe`): load a file, collect what the
browser complained about, evaluate JavaScript in the page, take a screenshot. No Python dependency: the protocol is
JSON messages separated by NUL bytes on two pipes (Chromium reads fd 3, writes fd 4).

Why the protocol and not `--dump-dom` plus log scraping: it reports script exceptions, console errors and failed or
external network requests as events, and measures the laid-out page (sizes, visibility) rather than the HTML text.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


@dataclass
class PageProblems:
    """What the browser reported while the page loaded: each a one-line description."""

    exceptions: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every URL the page fetched besides itself
    failed: list[str] = field(default_factory=list)


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, exe: str, *, width: int = 1280, height: int = 900, timeout_s: float = 60.0):
        self.exe, self.width, self.height, self.timeout_s = exe, width, height, timeout_s
        self._id = 0
        self._buf = b""
        self.problems = PageProblems()
        self._session = ""

    def __enter__(self) -> Browser:
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        self._user_dir = Path(os.environ.get("TMPDIR", "/tmp")) / f"speculab-chromium-{os.getpid()}-{id(self)}"
        args = [
            self.exe,
            "--headless",
            "--no-sandbox",  # CI runs as root in a container, where Chromium's sandbox cannot start
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            f"--user-data-dir={self._user_dir}",
            f"--window-size={self.width},{self.height}",
            "--remote-debugging-pipe",
            "about:blank",
        ]

        def fds() -> None:  # in the child, before exec: the pipe ends become fds 3 (its input) and 4 (its output)
            w = os.dup(from_child_w) if from_child_w == 3 else from_child_w  # dup2 onto 3 must not close it first
            os.dup2(to_child_r, 3)
            os.dup2(w, 4)

        self._proc = subprocess.Popen(
            args, preexec_fn=fds, pass_fds=(3, 4), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_child_r)
        os.close(from_child_w)
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": self.width, "height": self.height, "deviceScaleFactor": 1, "mobile": False},
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self._proc.kill()
        self._proc.wait(timeout=30)
        os.close(self._to_child)
        os.close(self._from_child)
        shutil.rmtree(self._user_dir, ignore_errors=True)

    # --- the protocol ------------------------------------------------------------------------------------------

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one command and wait for its answer, recording the events that arrive meanwhile."""
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if self._session and not method.startswith("Target."):
            msg["sessionId"] = self._session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._next()
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._event(reply)

    def _next(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError(f"Chromium sent nothing for {self.timeout_s:.0f} s")
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise RuntimeError(f"Chromium exited (code {self._proc.poll()})")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def _event(self, ev: dict[str, Any]) -> None:
        method, p = ev.get("method", ""), ev.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.problems.exceptions.append(d.get("exception", {}).get("description") or d.get("text", "?"))
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.problems.console_errors.append(" ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            self.problems.console_errors.append(p["entry"].get("text", "?"))
        elif method == "Network.requestWillBeSent":
            self.problems.requests.append(p.get("request", {}).get("url", "?"))
        elif method == "Network.loadingFailed":
            self.problems.failed.append(f"{p.get('errorText', '?')} ({p.get('type', '')})")
        elif method == "Page.loadEventFired":
            self._loaded = True

    # --- what a test uses --------------------------------------------------------------------------------------

    def load(self, path: Path) -> None:
        """Open a local file and return once its load event fired (every inline resource laid out)."""
        self._loaded = False
        self.problems = PageProblems()
        url = path.resolve().as_uri()
        self.call("Page.navigate", {"url": url})
        while not self._loaded:
            self._event(self._next())
        self.problems.requests = [u for u in self.problems.requests if u != url]

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page."""
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in r:
            raise RuntimeError(f"in the page: {r['exceptionDetails'].get('text')}")
        return r["result"].get("value")

    def screenshot(self, path: Path) -> None:
        """A PNG of the viewport (the top of the page)."""
        data = self.call("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
