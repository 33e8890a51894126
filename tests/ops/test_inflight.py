"""Requests in flight across gunicorn's workers (common/inflight.py): what a question's embedding
threads are chosen by (retrieval.embedders.LocalEmbedder.query_threads)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from django.http import HttpRequest, HttpResponse

from common import inflight
from serving import gunicorn_conf


@pytest.fixture
def fresh_counters() -> Iterator[None]:
    saved = inflight._slots, inflight._connections, inflight._slot, inflight._own
    inflight._slots, inflight._connections, inflight._slot, inflight._own = None, None, None, 0
    yield
    inflight._slots, inflight._connections, inflight._slot, inflight._own = saved


def test_the_middleware_counts_a_request_while_it_is_answered_even_when_it_fails(fresh_counters: None) -> None:
    seen = []

    def answer(request: HttpRequest) -> HttpResponse:
        seen.append(inflight.answering())
        if request.path == "/fails":
            raise RuntimeError("the view failed")
        return HttpResponse()

    middleware = inflight.InFlightMiddleware(answer)
    request = HttpRequest()
    middleware(request)
    request.path = "/fails"
    with pytest.raises(RuntimeError):
        middleware(request)

    assert seen == [1, 1]
    assert inflight.answering() == 0


def test_workers_see_each_others_requests_and_a_killed_workers_go_with_it(fresh_counters: None) -> None:
    """The gunicorn hooks as the master and two workers call them, the first worker a forked process."""
    server = SimpleNamespace(WORKERS={})
    inflight.share_between_workers()  # on_starting, in the master
    first, second = SimpleNamespace(), SimpleNamespace()
    gunicorn_conf.pre_fork(server, first)
    server.WORKERS[1] = first
    gunicorn_conf.pre_fork(server, second)
    assert {first.inflight_slot, second.inflight_slot} == {0, 1}

    ready_read, ready_write = os.pipe()
    hold_read, hold_write = os.pipe()  # never written: the first worker's request never ends
    pid = os.fork()
    if pid == 0:  # the first worker: killed in the middle of a request
        try:
            gunicorn_conf.post_fork(server, first)
            with inflight.answering_one():
                os.write(ready_write, b"x")
                os.read(hold_read, 1)
        finally:
            os._exit(0)
    try:
        assert os.read(ready_read, 1) == b"x"
        gunicorn_conf.post_fork(server, second)  # this process plays the second worker
        with inflight.answering_one():
            assert inflight.answering() == 2
        assert inflight.answering() == 1
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        for fd in (ready_read, ready_write, hold_read, hold_write):
            os.close(fd)
    assert inflight.answering() == 1  # the dead worker's slot still counts its request...
    gunicorn_conf.child_exit(server, first)  # ...until the master hears it exited
    assert inflight.answering() == 0

    # Its replacement gets the free slot back, counted from zero.
    del server.WORKERS[1]
    third = SimpleNamespace()
    gunicorn_conf.pre_fork(server, third)
    assert third.inflight_slot == first.inflight_slot


def test_without_gunicorn_a_process_counts_its_own_requests(fresh_counters: None) -> None:
    with inflight.answering_one(), inflight.answering_one():
        assert inflight.answering() == 2
    assert inflight.answering() == 0


def test_a_worker_takes_a_connection_only_when_no_worker_holds_fewer_and_hands_back_a_surplus(
    fresh_counters: None,
) -> None:
    """The counts serving.gunicorn_worker keeps, as the master and three workers' loops set them."""
    assert inflight.fewest_connections(5)  # outside gunicorn: nothing to compare with
    assert not inflight.surplus_connections(5)
    server = SimpleNamespace(WORKERS={})
    inflight.share_between_workers()
    workers = [SimpleNamespace() for _ in range(3)]
    for n, worker in enumerate(workers):
        gunicorn_conf.pre_fork(server, worker)
        server.WORKERS[n] = worker
    slot = {id(worker): worker.inflight_slot for worker in workers}

    def as_worker(worker: SimpleNamespace) -> None:
        inflight._slot = slot[id(worker)]

    first, second, third = workers
    as_worker(first)
    inflight.hold_connections(2)
    assert inflight.fewest_connections(2)  # the others are still starting: they take nothing yet
    as_worker(second)
    inflight.hold_connections(1)
    assert inflight.fewest_connections(1)  # the first holds two
    as_worker(first)
    assert not inflight.fewest_connections(2)  # the second holds one: it takes the next
    assert not inflight.surplus_connections(2)  # one more than the second: kept
    assert inflight.surplus_connections(3)  # two more: one is handed back
    gunicorn_conf.child_exit(server, second)  # the second exits: its count goes with it
    assert inflight.fewest_connections(2)
    assert not inflight.surplus_connections(3)  # the third is still starting: nobody to hand it to
