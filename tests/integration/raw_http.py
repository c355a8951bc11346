"""Bytes-level HTTP/1.1 for server tests: exactly the bytes we choose go out, and the answer is parsed by hand.

http.client and urllib normalize or refuse much of what a hostile client sends (huge or odd headers, bodies that
do not match their framing); these helpers do not.
"""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    events: list[Any] = field(default_factory=list)  # SSE payloads (parsed JSON, or "[DONE]")

    def json(self) -> Any:
        return json.loads(self.body)


def request_bytes(
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict[str, str] | None = None,
    *,
    content_type: str | None = "application/json",
) -> bytes:
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1"]
    if content_type is not None:
        head.append(f"Content-Type: {content_type}")
    if body or method == "POST":
        head.append(f"Content-Length: {len(body)}")
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def read_answer(sock: socket.socket) -> Answer:
    """One response (Content-Length, chunked or until close); SSE bodies are split into events."""
    f = sock.makefile("rb")
    status_line = f.readline()
    if not status_line:
        raise ConnectionError("the server closed the connection without answering")
    status = int(status_line.split()[1])
    headers: dict[str, str] = {}
    while (line := f.readline()) not in (b"\r\n", b"\n", b""):
        k, _, v = line.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    if "content-length" in headers:
        body = f.read(int(headers["content-length"]))
    elif headers.get("transfer-encoding") == "chunked":
        body = b""
        while (size := int(f.readline().strip() or b"0", 16)) > 0:
            body += f.read(size)
            f.readline()
        f.readline()
    else:
        body = f.read()
    answer = Answer(status, headers, body)
    if headers.get("content-type", "").startswith("text/event-stream"):
        for event in body.split(b"\n\n"):
            if event.startswith(b"data: "):
                payload = event[6:].decode()
                answer.events.append(payload if payload == "[DONE]" else json.loads(payload))
    return answer


def exchange(port: int, data: bytes, timeout_s: float = 30.0) -> Answer:
    """Send `data` on a new connection and read one answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(data)
        return read_answer(sock)


def post_json(port: int, path: str, body: Any, headers: dict[str, str] | None = None) -> Answer:
    return exchange(port, request_bytes("POST", path, json.dumps(body).encode(), headers))


def is_openai_error(answer: Answer) -> bool:
    try:
        err = answer.json()["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return set(err) == {"message", "type", "param", "code"} and isinstance(err["message"], str) and bool(err["message"])


def closed(sock: socket.socket) -> bool:
    """Has the server closed this (non-blocking) connection? A 408 it sent first is read and dropped."""
    try:
        while sock.recv(4096):
            pass
        return True
    except BlockingIOError:
        return False
    except OSError:  # reset: closed too
        return True
