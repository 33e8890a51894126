"""One value per process, made on first use; a process forked from this one makes its own.

gunicorn and Celery fork their workers from a parent that may already hold some of these values:
a thread does not survive a fork (a writer thread, a thread pool, a loader), and a socket or an
onnxruntime session shared with the parent must not be used from the child. ``PerProcess`` keys
its value by the process id, so a child sees none and makes its own the first time it asks: it
works for any fork, whichever library made it.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

_holders: weakref.WeakSet[PerProcess[Any]] = weakref.WeakSet()


class PerProcess(Generic[T]):
    """This process's value of ``make()``: made once, by whichever thread asks first."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._held: tuple[int, T] | None = None
        self._lock = threading.Lock()
        _holders.add(self)

    def get(self) -> T:
        """This process's value, made now if it has none yet."""
        pid = os.getpid()
        held = self._held
        if held is not None and held[0] == pid:
            return held[1]
        with self._lock:
            held = self._held
            if held is None or held[0] != pid:
                held = self._held = (pid, self._make())
            return held[1]


def _new_locks() -> None:
    # A fork while another thread was making a value copies its lock held, with no thread left in
    # the child to release it.
    for holder in list(_holders):
        holder._lock = threading.Lock()


os.register_at_fork(after_in_child=_new_locks)
