"""An injected fault inside step() for one request: that request gets OpenAI's 500 (unary) or an error event and
[DONE] (streaming); the requests beside it finish with their normal text, /health stays 200, and the server
serves on. The fault is a model runner that raises whenever a batch holds a row of a poisoned request."""

from __future__ import annotations

import threading

import pytest
from tests.fakes.engine_fakes import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.integration.raw_http import is_openai_error, post_json
from tests.integration.server_harness import running_server

POISON = "zzz"  # requests whose prompt contains it fail inside the engine


def poison(server) -> None:
    poison_ids = server.tokenizer.encode(POISON, add_special_tokens=False)
    runner = server.engine.runner
    for name in ("last_logits", "write"):
        original = getattr(runner, name)

        def faulty(rows, original=original):
            scheduler = server.engine.scheduler
            bad = {s.slot for s in scheduler.running if _contains(s.prompt_ids, poison_ids)}
            if any(r.slot in bad for r in rows):
                raise RuntimeError("injected fault: kernel exploded")
            return original(rows)

        setattr(runner, name, faulty)


def _contains(ids: list[int], sub: list[int]) -> bool:
    return any(ids[i : i + len(sub)] == sub for i in range(len(ids) - len(sub) + 1))


def request(prompt: str, stream: bool, chat: bool = False) -> tuple[str, dict]:
    base = {"model": "tiny", "max_tokens": 12, "temperature": 0, "ignore_eos": True, "stream": stream}
    if chat:
        return "/v1/chat/completions", {**base, "messages": [{"role": "user", "content": prompt}]}
    return "/v1/completions", {**base, "prompt": prompt}


def text_of(answer) -> str:
    if answer.events:
        choices = [e["choices"][0] for e in answer.events if isinstance(e, dict) and e.get("choices")]
        return "".join(c.get("text") or (c.get("delta") or {}).get("content") or "" for c in choices)
    c = answer.json()["choices"][0]
    return c["text"] if "text" in c else c["message"]["content"]


@pytest.fixture
def server():
    with running_server(max_num_seqs=4) as s:
        yield s


def test_a_fault_inside_step_fails_only_its_request(server):
    good = [request("hello there", False), request("hello there", True), request("abc", True, chat=True)]
    bad = [request(f"{POISON} unary", False), request(f"{POISON} stream", True), request(POISON, False, chat=True)]
    expected = [text_of(post_json(server.port, *r)) for r in good]
    poison(server)

    answers: dict[int, object] = {}

    def send(i: int, r: tuple[str, dict]) -> None:
        answers[i] = post_json(server.port, *r)

    threads = [threading.Thread(target=send, args=(i, r)) for i, r in enumerate(good + bad)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for i in range(len(good)):
        assert answers[i].status == 200 and text_of(answers[i]) == expected[i]
    unary, streamed, chat = (answers[len(good) + i] for i in range(3))
    for a in (unary, chat):
        assert a.status == 500 and is_openai_error(a)
        assert a.json()["error"]["type"] == "server_error" and "injected fault" in a.json()["error"]["message"]
    assert streamed.status == 200 and streamed.events[-1] == "[DONE]"
    err = [e for e in streamed.events if isinstance(e, dict) and "error" in e]
    assert len(err) == 1 and "injected fault" in err[0]["error"]["message"]

    assert server.get("/health")[0] == 200
    assert post_json(server.port, *request("hello there", False)).status == 200
    assert len(server.engine.scheduler.free_slots) == 4 and server.async_engine.num_in_flight == 0
    metrics = server.get("/metrics")[1]
    assert 'speculab:request_errors_total{model_name="tiny",status="500"} 3.0' in metrics
    assert 'finished_reason="abort"' not in metrics  # a failed request is an error, not an abandoned one
