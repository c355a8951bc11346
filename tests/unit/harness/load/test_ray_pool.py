"""The Ray pool's own logic with stand-in actors (no Ray needed): records and start times moved onto the
coordinator's clock, the common start moved onto each worker's, and an actor that is gone reported, not waited on."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from typing import Any

import pytest

from speculab import __version__
from speculab.errors import UserError
from speculab.harness.load.clock_sync import SAME_CLOCK, ClockOffset
from speculab.harness.load.ray_pool import RayPool, _check_workers, is_loopback
from speculab.harness.records import ChunkEvent, RequestRecord


class Ref:
    def __init__(self, value: Any):
        self.value = value

    def future(self) -> Future:
        f: Future = Future()
        if isinstance(self.value, BaseException):
            f.set_exception(self.value)
        else:
            f.set_result(self.value)
        return f


class Method:
    def __init__(self, answer: Any = None):
        self.answer, self.calls = answer, []

    def remote(self, *args: Any) -> Ref:
        self.calls.append(args)
        a = self.answer
        return Ref(a.pop(0) if isinstance(a, list) else a)


class Actor:
    def __init__(self, polls: list[Any]):
        self.poll, self.go, self.stop = Method(polls), Method(), Method()


class FakeRay:
    def __init__(self) -> None:
        self.killed: list[Actor] = []

    def kill(self, actor: Actor) -> None:
        self.killed.append(actor)


REMOTE = ClockOffset(offset_s=1000.0, uncertainty_s=0.0004, kind="round trip", samples=16)


def pool(actors: dict[int, Actor]) -> tuple[RayPool, FakeRay]:
    ray = FakeRay()
    infos = {w: {"host": f"node{w}", "node_ip": f"10.0.0.{w}", "pid": 100 + w} for w in actors}
    clocks = {0: SAME_CLOCK, 1: REMOTE}
    return RayPool(ray, actors, infos, clocks, {0: REMOTE, 1: REMOTE}), ray


def test_a_remote_workers_times_come_onto_the_coordinators_clock_and_the_start_onto_its_own():
    rec = RequestRecord(index=7, scheduled_s=1010.0, sent_s=1010.0, end_s=1011.0, chunks=(ChunkEvent(1010.2, "x", 1),))
    done = ("done", 1, {"started_s": 1009.0, "ended_s": 1012.0, "start_at_s": 1009.0, "start_lag_s": 0.0001})
    local = RequestRecord(index=2, scheduled_s=5.0, sent_s=5.0, end_s=6.0)
    a0, a1 = Actor([[("rec", local.to_dict())], []]), Actor([[("ready", 1), ("rec", rec.to_dict()), done]])
    p, _ = pool({0: a0, 1: a1})
    msgs = asyncio.run(p.messages())
    got = {m[0] + str(i): m for i, m in enumerate(msgs)}
    assert RequestRecord.from_dict(got["rec0"][1]) == local  # one host: untouched
    moved = RequestRecord.from_dict(got["rec2"][1])
    assert (moved.sent_s, moved.end_s, moved.chunks[0].t_s) == (10.0, 11.0, 1010.2 - 1000.0)
    assert got["done3"][2]["started_s"] == 9.0 and got["done3"][2]["start_lag_s"] == 0.0001  # lag: its own clock
    p.go(20.0)
    assert a0.go.calls == [(20.0,)] and a1.go.calls == [(1020.0,)]
    # a finished worker is not polled again
    assert asyncio.run(p.messages()) == [] and len(a1.poll.calls) == 1
    d = p.describe(1)
    assert d["clock"]["offset_s"] == 1000.0 and d["clock"]["uncertainty_s"] == 0.0004 and d["ray"] is True


def test_an_actor_that_is_gone_is_reported_once_and_the_rest_keep_going():
    a0 = Actor([[("ready", 0)], [("done", 0, {"started_s": 1.0})]])
    a1 = Actor([RuntimeError("The actor died unexpectedly before finishing this task.\nmore detail")])
    p, ray = pool({0: a0, 1: a1})
    assert asyncio.run(p.messages()) == [("ready", 0)]
    lost = p.lost(set())
    assert (
        list(lost) == [1]
        and lost[1]["crashed"]
        and lost[1]["error"] == ("RuntimeError: The actor died unexpectedly before finishing this task.")
    )
    assert asyncio.run(p.messages()) == [("done", 0, {"started_s": 1.0})]
    assert len(a1.poll.calls) == 1  # not asked again
    assert p.lost({0, 1}) == {}
    p.close()
    assert ray.killed == [a0, a1] and a1.stop.calls == []  # a dead actor is not sent a stop


def test_loopback_urls_are_recognised():
    for url in ("http://127.0.0.1:8000", "http://localhost:8000/v1", "http://[::1]:9000"):
        assert is_loopback(url), url
    for url in ("http://10.0.0.5:8000", "https://api.example.com"):
        assert not is_loopback(url), url


def test_nodes_on_another_version_or_unable_to_reach_a_loopback_url_are_refused_in_one_line():
    here = {"node_ip": "10.0.0.1", "clock_id": "b"}
    same = {0: {"version": __version__, "node_ip": "10.0.0.1"}, 1: {"version": __version__, "node_ip": "10.0.0.1"}}
    _check_workers(same, here, "http://127.0.0.1:8000")  # one node: loopback is fine
    spread = {**same, 1: {"version": __version__, "node_ip": "10.0.0.2"}}
    _check_workers(spread, here, "http://10.0.0.9:8000")
    with pytest.raises(UserError, match=r"loopback, which workers on other nodes \(10\.0\.0\.2\) cannot reach"):
        _check_workers(spread, here, "http://localhost:8000")
    old = {**same, 1: {"version": "0.0.1", "node_ip": "10.0.0.1"}}
    with pytest.raises(UserError, match=r"Ray nodes run speculab 0\.0\.1, this machine"):
        _check_workers(old, here, "http://127.0.0.1:8000")


def test_without_ray_installed_the_error_names_the_extra(monkeypatch):
    import sys

    from speculab.harness.load.ray_pool import require_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # what an environment without Ray gives `import ray`
    with pytest.raises(UserError, match=r"--ray needs Ray on this machine: pip install 'speculab\[ray\]'"):
        require_ray()
