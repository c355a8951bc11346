"""A launch's port: moved in the command (`--port N`, `--port=N`), chosen for `port: auto`, and a bind failure read
from the engines' own words in their logs (the race itself: tests/integration/test_port_taken.py)."""

from __future__ import annotations

import pytest

from speculab.config import parse_experiment
from speculab.errors import UserError
from speculab.harness.results.warnings import ReportWarning, WarningKind
from speculab.harness.servers.adapters import adapter_for
from speculab.harness.servers.process import ServerCommand, chosen_port_command, port_taken, with_port
from speculab.report.phrases import warning_text


def test_with_port_rewrites_the_port_flag_and_the_url() -> None:
    cmd = ServerCommand(("vllm", "serve", "m", "--port", "8000", "--max-num-seqs", "8000"), 8000)
    moved = with_port(cmd, 41234)
    assert moved.command == ("vllm", "serve", "m", "--port", "41234", "--max-num-seqs", "8000")
    assert moved.port == 41234 and moved.url == "http://127.0.0.1:41234"
    eq = with_port(ServerCommand(("llama-server", "--port=8080", "-m", "x"), 8080), 5)
    assert eq.command == ("llama-server", "--port=5", "-m", "x")


def test_a_command_without_port_flag_cannot_be_moved() -> None:
    with pytest.raises(UserError, match="takes no --port; add --port to it, or pin the port it listens on"):
        with_port(ServerCommand(("server", "-p", "8000"), 8000), 9)


def test_port_auto_is_a_chosen_port_written_in_the_command() -> None:
    cmd = chosen_port_command(ServerCommand(("speculab", "serve", "demo", "--port", "8000"), 0))
    assert cmd.port_chosen and cmd.port > 0 and cmd.command[-1] == str(cmd.port)


@pytest.mark.parametrize(
    "log",
    [
        "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 8000): address already in use",
        '  File "socket.py"...\nOSError: [Errno 98] Address already in use',  # vLLM's own socket, its traceback
        "Error: Axum(Address already in use (os error 98))",  # TGI
        "error: cannot listen on 127.0.0.1:8000 (Address already in use); pass another --port, or --port 0",
        "listen EADDRINUSE: address already in use :::8000",
    ],
)
def test_the_os_words_for_a_taken_port_are_read_in_any_engine_s_log(log: str) -> None:
    assert port_taken(log)


def test_an_engine_s_own_words_come_from_its_adapter() -> None:
    log = "main: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080"  # llama.cpp
    assert not port_taken(log)
    assert port_taken(log, adapter_for("llamacpp").port_taken_signs)
    assert not port_taken("RuntimeError: CUDA out of memory", adapter_for("llamacpp").port_taken_signs)


def test_port_auto_in_an_experiment_and_its_mistakes() -> None:
    base = (
        'workload: "synthetic:input=10,output=8"\nloads: {operating: {concurrency: 1}}\n'
        "speculation: {method: ngram, num_speculative_tokens: 2}\n"
    )
    launch = 'engine: vllm, command: [vllm, serve, m, --port, "1"]'
    auto = parse_experiment(base + f"baseline: {{launch: {{{launch}, port: auto}}}}")
    assert auto.baseline.launch is not None and auto.baseline.launch.port is None and auto.baseline.base_url is None
    with pytest.raises(UserError, match="port") as e:
        parse_experiment(base + f"baseline: {{launch: {{{launch}, port: any}}}}")
    assert "\n" not in str(e.value)


def test_the_report_words_a_port_taken() -> None:
    w = ReportWarning(WarningKind.PORT_TAKEN, fields={"arm": "ngram-k2", "repeat": 1, "ports_taken": [5, 6], "port": 7})
    assert warning_text(w) == (
        "ngram-k2 r1: another process took port 5, 6 before the server could bind it; relaunched on port 7"
    )
