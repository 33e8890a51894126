"""Retrieves take turns on a web worker (common/turns.py): one at a time, in arrival order, and a
turn is given away while its holder waits on an LLM or a remote embedder."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory

from common import turns
from common.turns import Turns, TurnsMiddleware
from retrieval.embedders import OpenAIEmbedder
from retrieval.llm import complete
from tests.support import openai_fixtures
from tests.support.openai_server import FakeOpenAI, Fault

fake_openai = openai_fixtures.fake_openai  # also in tests/conftest.py; here so these run alone

WAIT = 5.0  # seconds any step may take before the test counts it as stuck


def started(target: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


def joined(*threads: threading.Thread) -> None:
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive(), "a thread is stuck"


class Overlap:
    """The most threads inside ``run`` at once."""

    def __init__(self) -> None:
        self.most = 0
        self._inside = 0
        self._guard = threading.Lock()

    def run(self, seconds: float) -> None:
        with self._guard:
            self._inside += 1
            self.most = max(self.most, self._inside)
        time.sleep(seconds)
        with self._guard:
            self._inside -= 1


def holder_and_one_in_line(
    line: Turns, holder: Callable[[], None], other: Callable[[], None], queued: threading.Event
) -> None:
    """Runs ``holder``, which takes a turn and then waits for ``queued``; once it holds the turn,
    ``other``, which asks for one; sets ``queued`` when ``other`` is in line, and waits for both."""
    one = started(holder)
    until(lambda: line._holder is not None)
    two = started(other)
    until(lambda: line.waiting() == 1)
    queued.set()
    joined(one, two)


def test_turns_are_taken_in_the_order_they_were_asked_for() -> None:
    line = Turns()
    order: list[int] = []
    release = threading.Event()

    def first() -> None:
        with line.turn():
            release.wait(WAIT)

    def later(n: int) -> Callable[[], None]:
        def run() -> None:
            with line.turn():
                order.append(n)

        return run

    holder = started(first)
    until(lambda: line._holder is not None)
    waiting = []
    for n in (1, 2, 3, 4):
        waiting.append(started(later(n)))
        until(lambda n=n: line.waiting() == n)  # type: ignore[misc]
    release.set()
    joined(holder, *waiting)
    assert order == [1, 2, 3, 4]


def test_one_turn_at_a_time_and_an_error_hands_it_on() -> None:
    line = Turns()
    overlap = Overlap()

    def run(fail: bool) -> None:
        try:
            with line.turn():
                overlap.run(0.01)
                if fail:
                    raise RuntimeError("the request failed")
        except RuntimeError:
            pass

    joined(*[started(lambda fail=n % 2 == 0: run(fail)) for n in range(6)])  # type: ignore[misc]
    assert overlap.most == 1
    assert line._holder is None and line.waiting() == 0


def test_the_holder_may_take_a_turn_inside_its_own() -> None:
    line = Turns()
    done = threading.Event()

    def nested() -> None:
        with line.turn(), line.turn(), line.turn():
            pass
        done.set()

    joined(started(nested))
    assert done.is_set() and line._holder is None


def test_a_holder_waiting_elsewhere_lets_the_next_in_line_take_the_turn_then_queues_again() -> None:
    line = Turns()
    events: list[str] = []
    second_queued, second_in = threading.Event(), threading.Event()

    def first() -> None:
        with line.turn():
            with line.turn():  # nested: its depth comes back with the turn
                assert second_queued.wait(WAIT)
                with line.elsewhere():
                    events.append("first waits elsewhere")
                    assert second_in.wait(WAIT), "the next in line did not get the turn"
                events.append("first has its turn again")
            events.append("first leaves its nested turn")

    def second() -> None:
        with line.turn():
            events.append("second has the turn")
            second_in.set()
            time.sleep(0.05)  # the first's wait ended meanwhile: it must still wait for this turn
            events.append("second is done")

    holder_and_one_in_line(line, first, second, second_queued)
    assert events == [
        "first waits elsewhere",
        "second has the turn",
        "second is done",
        "first has its turn again",
        "first leaves its nested turn",
    ]
    assert line._holder is None


def test_waiting_elsewhere_without_a_turn_changes_nothing() -> None:
    line = Turns()
    release, inside = threading.Event(), threading.Event()

    def holder() -> None:
        with line.turn():
            inside.set()
            release.wait(WAIT)

    thread = started(holder)
    assert inside.wait(WAIT)
    with line.elsewhere():  # this thread holds no turn: the holder keeps its own
        assert line._holder == thread.ident
    release.set()
    joined(thread)


@pytest.fixture
def fresh_turns(monkeypatch: pytest.MonkeyPatch) -> Turns:
    line = Turns()
    monkeypatch.setattr(turns, "process_turns", lambda: line)
    return line


def concurrency_of(path: str, *, mode: str, settings: Any) -> int:
    """How many of three requests to ``path`` the middleware lets answer at once."""
    overlap = Overlap()

    def answer(request: HttpRequest) -> HttpResponse:
        overlap.run(0.05)
        return HttpResponse()

    settings.MEMORYHUB_RETRIEVE_TURNS = mode
    middleware = TurnsMiddleware(answer)
    requests = [RequestFactory().post(path, data="{}", content_type="application/json") for _ in range(3)]
    joined(*[started(lambda r=r: middleware(r)) for r in requests])  # type: ignore[misc]
    return overlap.most


def test_only_the_retrieve_endpoints_take_turns(settings: Any, fresh_turns: Turns) -> None:
    assert concurrency_of("/api/v1/retrieve", mode="on", settings=settings) == 1
    assert concurrency_of("/api/v1/tools/query_memory", mode="on", settings=settings) == 1
    assert concurrency_of("/api/v1/capture", mode="on", settings=settings) == 3
    assert concurrency_of("/api/v1/retrieve", mode="off", settings=settings) == 3


def test_a_retrieve_reads_its_body_before_it_waits(settings: Any, fresh_turns: Turns) -> None:
    settings.MEMORYHUB_RETRIEVE_TURNS = "on"
    middleware = TurnsMiddleware(lambda request: HttpResponse(request.body))
    waiting = RequestFactory().post("/api/v1/retrieve", data='{"query": "q"}', content_type="application/json")
    with fresh_turns.turn():  # another retrieve is being answered
        thread = started(lambda: middleware(waiting))
        until(lambda: fresh_turns.waiting() == 1)
        assert waiting._body == b'{"query": "q"}'  # type: ignore[attr-defined]  # read while in line
    joined(thread)


def test_the_middleware_comes_first_so_waiting_requests_are_not_counted_as_answered() -> None:
    assert django_settings.MIDDLEWARE[:2] == [
        "common.turns.TurnsMiddleware",
        "common.inflight.InFlightMiddleware",
    ]


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("", True),
        ("/work/.memoryhub/run", True),
        ("localhost", True),
        ("127.0.0.1", True),
        ("::1", True),
        ("[::1]", True),
        ("db.internal", False),
        ("10.0.0.5", False),
    ],
)
def test_auto_takes_turns_only_with_the_database_on_this_machine(host: str, local: bool) -> None:
    assert turns.host_is_local(host) is local


def test_the_setting_decides_and_auto_wants_a_retrieve_to_be_all_work_on_this_machine(settings: Any) -> None:
    settings.MEMORYHUB_RETRIEVE_TURNS = "off"
    assert not turns.enabled()
    settings.MEMORYHUB_RETRIEVE_TURNS = "on"
    settings.OPENAI_API_KEY = "sk-test"
    assert turns.enabled()
    settings.MEMORYHUB_RETRIEVE_TURNS = "auto"
    assert not turns.enabled()  # an LLM is configured: HyDE may run
    settings.OPENAI_API_KEY, settings.MEMORYHUB_LLM_BASE_URL = "", "http://127.0.0.1:9/v1"
    assert not turns.enabled()
    settings.MEMORYHUB_LLM_BASE_URL = ""
    settings.MEMORYHUB_EMBEDDER = "openai"
    assert not turns.enabled()  # a remote embedder
    settings.MEMORYHUB_EMBEDDER = "local-mpnet"
    assert turns.enabled()  # the suite's database and Redis are the embedded ones, on Unix sockets
    settings.REDIS_URL = "redis://cache.internal:6379/0"
    assert not turns.enabled()  # Redis across a network
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    assert turns.enabled()
    host = str(settings.DATABASES["default"].get("HOST") or "")
    assert turns.host_is_local(host)


def handed_over_while(wait: Callable[[], object], line: Turns) -> list[str]:
    """Events of a thread holding a turn while it runs ``wait``, with another retrieve in line."""
    events: list[str] = []
    other_queued = threading.Event()

    def holder() -> None:
        with line.turn():
            assert other_queued.wait(WAIT)
            wait()
            events.append("the slow call returned")

    def other() -> None:
        with line.turn():
            events.append("another retrieve had the turn")

    holder_and_one_in_line(line, holder, other, other_queued)
    return events


def test_an_llm_call_gives_the_turn_away_while_it_waits(fake_openai: FakeOpenAI, fresh_turns: Turns) -> None:
    fake_openai.script_chat(Fault(delay=0.5))

    def slow() -> object:
        return complete(
            [{"role": "user", "content": "hi"}], model="m", timeout=5, base_url=fake_openai.base_url, api_key="k"
        )

    assert handed_over_while(slow, fresh_turns) == ["another retrieve had the turn", "the slow call returned"]


def test_a_remote_embedder_gives_the_turn_away_while_it_waits(fake_openai: FakeOpenAI, fresh_turns: Turns) -> None:
    fake_openai.script_embeddings(Fault(delay=0.5))
    embedder = OpenAIEmbedder(model="fake-embed", base_url=fake_openai.base_url, api_key="k", dimension=64)
    events = handed_over_while(lambda: embedder.embed(["a question"]), fresh_turns)
    assert events == ["another retrieve had the turn", "the slow call returned"]
