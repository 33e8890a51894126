"""Work a request may leave until its response has gone to the client.

``defer(work)`` inside a request queues ``work`` for Django's ``request_finished`` signal, which
the WSGI server sends after writing the response body: the client no longer waits for it, the
worker still does it before taking the next request. Outside a request (Celery tasks, management
commands, a direct engine call) it runs at once. Deferred work that fails is logged, never raised.
The retrieval log is the one user (a write per retrieve, ~1-2 ms that the answer does not need).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from django.core.signals import request_finished, request_started

log = logging.getLogger(__name__)

_state = threading.local()


def defer(work: Callable[[], None]) -> None:
    """Run ``work`` once this thread's response has been sent (now, outside a request)."""
    pending: list[Callable[[], None]] | None = getattr(_state, "pending", None)
    if pending is None:
        work()
    else:
        pending.append(work)


def _started(**kwargs: Any) -> None:
    _state.pending = []


def _finished(**kwargs: Any) -> None:
    pending, _state.pending = getattr(_state, "pending", None), None
    for work in pending or ():
        try:
            work()
        except Exception:  # a log row lost must not turn into an error for the next request
            log.exception("work deferred until after the response failed")


request_started.connect(_started, dispatch_uid="memoryhub.after_response.started")
request_finished.connect(_finished, dispatch_uid="memoryhub.after_response.finished")
