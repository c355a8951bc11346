"""A launch survives a port another process takes between speculab choosing it and the server binding it (issue 49):
the mock server waits `--startup-ms` before it listens, as an engine loading its model does; a socket bound and
listening takes its port within that second, the server dies with "address already in use", and speculab relaunches
it on another port. A port the user pinned is one line naming the fix; a run with `port: auto` records the move in
launches.json and in the report's notes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from speculab.commands.run.plan import plan_experiment
from speculab.commands.run.run import run_plan
from speculab.config import parse_experiment
from speculab.errors import UserError
from speculab.harness.servers.process import Launched, ServerCommand, free_port, launch_server

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _mock(port: int, *extra: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "speculab", "mock-server", "--port", str(port), "--ttft-ms", "1", "--gap-ms", "1",
            "--output-tokens", "4", *extra)  # fmt: skip


@contextlib.contextmanager
def _taken(port: int) -> Iterator[socket.socket]:
    """Another process's socket on `port`, bound and listening (what a Ray worker or any server would hold)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        yield s


async def _launch_while_taken(cmd: ServerCommand, log: Path) -> Launched:
    """Launch `cmd` and, once its process has started (its command is in the log) and before it listens, take its
    port: the server's own bind is the one that fails."""
    async with aiohttp.ClientSession() as session:
        task = asyncio.create_task(launch_server(cmd, log, session, name="mock"))
        while not (log.exists() and log.read_text(encoding="utf-8").startswith("$ ")):
            await asyncio.sleep(0.01)
        with _taken(cmd.port):
            return await task


def _startup_mock(port: int, *, chosen: bool) -> ServerCommand:
    cmd = _mock(port, "--startup-ms", "1000")
    return ServerCommand(cmd, port, {"PYTHONPATH": SRC}, ready_timeout_s=60, port_chosen=chosen)


@pytest.mark.slow
def test_a_chosen_port_taken_before_the_server_binds_it_relaunches_on_another(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "mock.log"
    launched = asyncio.run(_launch_while_taken(_startup_mock(port, chosen=True), log))
    try:
        moved = launched.server.cmd
        assert launched.ports_taken == (port,) and moved.port != port and launched.ready_s is not None
        assert moved.command[moved.command.index("--port") + 1] == str(moved.port)
        assert moved.url.endswith(f":{moved.port}")
        text = log.read_text(encoding="utf-8")
        assert "address already in use" in text.lower() and text.count("$ ") == 2  # the failed launch, then the next
    finally:
        launched.server.stop(5)


@pytest.mark.slow
def test_a_pinned_port_taken_before_the_server_binds_it_is_one_line_naming_the_fix(tmp_path: Path) -> None:
    port = free_port()
    with pytest.raises(UserError) as e:
        asyncio.run(_launch_while_taken(_startup_mock(port, chosen=False), tmp_path / "mock.log"))
    msg = str(e.value)
    assert f"port {port} on 127.0.0.1 was taken by another process before the server could bind it" in msg
    assert "choose another port" in msg and "\n" not in msg


@pytest.mark.slow
def test_a_run_with_port_auto_moves_off_a_taken_port_and_records_it(tmp_path: Path) -> None:
    """The port `port: auto` chose is taken before the first launch: each arm is launched on another port, and
    launches.json and the report's notes say so."""
    exp = parse_experiment(
        f"""
workload: {{spec: "synthetic:input=10,output=4", num_prompts: 6, warmup_requests: 1}}
sampling: {{max_tokens: 4}}
loads: {{operating: {{concurrency: 1}}}}
baseline:
  launch: {{engine: other, command: {json.dumps(_mock(1))}, port: auto, env: {{PYTHONPATH: "{SRC}"}}}}
speculation: {{method: ngram, num_speculative_tokens: 1}}
candidate: {{command: {json.dumps(_mock(1, "--tokens-per-chunk", "2"))}}}
"""
    )
    plan = plan_experiment(exp)
    chosen = plan.arms[0].launch
    assert chosen is not None and chosen.port_chosen and chosen.command[5] == str(chosen.port)  # "1" replaced
    assert plan.arms[1].launch is not None and plan.arms[1].launch.command[5] == str(chosen.port)
    out = tmp_path / "run"
    with _taken(chosen.port):
        asyncio.run(run_plan(plan, out))
    launches = json.loads((out / "launches.json").read_text(encoding="utf-8"))
    assert [e["ports_taken"] for e in launches] == [[chosen.port], [chosen.port]]
    assert all(e["port"] != chosen.port for e in launches)
    inputs = json.loads((out / "inputs.json").read_text(encoding="utf-8"))
    notes = [n for n in inputs["notes"] if n["kind"] == "port_taken"]
    assert {n["fields"]["arm"] for n in notes} == {"baseline", plan.arms[1].info.name}
    assert all(n["fields"]["ports_taken"] == [chosen.port] for n in notes)
