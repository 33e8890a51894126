"""gunicorn's threaded worker, taking a new client connection only when no other worker holds fewer.

A gthread worker keeps a keep-alive connection to the end, and every worker wakes for a new one;
whichever accepts first keeps it. With four busy clients on two workers that was often three on
one worker and one on the other: three requests shared one process's interpreter lock while the
other process idled, and the 4-client p95 rose from 45-51 to 55-70 ms
(docs/adr/0043-web-process-layout.md). Here a worker that holds more connections than another leaves a new one to that
worker, for ``DEFER_S`` at most (it may be busy), then takes it itself. Each worker's count is in
shared memory (``common.inflight``). Configured in ``gunicorn_conf``.

When the other worker was slow to accept all the same (on a busy 2-core machine it may not run
for longer than ``DEFER_S``), the split stays uneven for as long as the clients stay connected:
3 : 1 in two of six 4-client runs on a 2-core Xeon. So a worker holding two connections more
than another answers a request with "Connection: close"; HTTP/1.1 clients open a new connection
for their next request, and the accept rule above sends it to the worker with fewer.

A request thread that has answered on a kept-alive connection waits up to ``LINGER_S`` for that
connection's next request and answers it too, unless another connection's request is waiting for a
thread. gthread's own way hands the connection to the main thread's poller, which hands the next
request to a thread again: two wake-ups between threads per request, each waiting for a core on a
busy machine (2,000 capture acks from 2 clients, paired: p95 11.4-13.6 -> 8.8-10.0 ms).
"""

from __future__ import annotations

import select
import time
from typing import Any

from gunicorn.workers.gthread import ThreadWorker

from common import inflight

# How long a worker with more connections leaves a waiting one to the others: an idle worker
# accepts within microseconds; one whose threads hold its interpreter may take a few milliseconds.
DEFER_S = 0.005
# How long a request thread waits on a kept-alive connection for the client's next request before
# handing the connection back to the main thread's poller (``handle``).
LINGER_S = 0.003


class BalancedThreadWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn ships no types
    """gthread (see the module docstring): ``accept`` decides, ``handle_request`` hands a surplus
    connection back, each round of the event loop publishes the count; the rest is gunicorn's own."""

    deferred_since: float | None = None  # when this worker first left the waiting connection
    asked_to_accept = False  # whether the poller reported a waiting connection this round

    def accept(self, listener: Any) -> None:
        self.asked_to_accept = True
        if not inflight.fewest_connections(self.nr_conns):
            now = time.monotonic()
            if self.deferred_since is None:
                self.deferred_since = now
            if now - self.deferred_since < DEFER_S:
                return  # still waiting to be accepted: the poller reports it again
        self.deferred_since = None
        super().accept(listener)
        inflight.hold_connections(self.nr_conns)

    def handle(self, conn: Any) -> Any:
        # In a request thread: gunicorn answers one request, then hands a kept-alive connection to
        # the main thread, which waits for the next request and hands it to a thread again.
        result = super().handle(conn)
        while result is True and self.alive and self._next_request_soon(conn):
            result = super().handle(conn)
        return result

    def _next_request_soon(self, conn: Any) -> bool:
        """Whether the connection's next request arrived within ``LINGER_S`` of its answer, while no
        other connection waits for a thread: then this thread answers it too, without two hand-offs
        between threads (each a wake-up that waits for a core on a busy machine)."""
        if conn.parser.unreader.buf.getvalue():
            return True  # already read ahead
        waiting = getattr(self.tpool, "_work_queue", None)  # ThreadPoolExecutor's queue of submitted work
        if waiting is None or not waiting.empty():
            return False  # another connection's request waits for a thread (or none can tell)
        try:
            readable, _, _ = select.select([conn.sock], [], [], LINGER_S)
        except (OSError, ValueError):
            return False
        return bool(readable)

    def handle_request(self, req: Any, conn: Any) -> bool:
        # In a request thread, before the response starts: gunicorn answers a request that must
        # close with "Connection: close" and closes the connection after the response.
        if inflight.surplus_connections(self.nr_conns):
            req.must_close = True
        return bool(super().handle_request(req, conn))

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        # Connections end in the callbacks run here (a response without keep-alive, a client
        # gone) and in the keep-alive sweep between two waits: publish the count after each.
        inflight.hold_connections(self.nr_conns)
        self.asked_to_accept = False
        super().wait_for_and_dispatch_events(timeout)
        inflight.hold_connections(self.nr_conns)
        if not self.asked_to_accept:
            self.deferred_since = None  # the connection it left was taken elsewhere
