"""One value per process (common/per_process.py): a forked child makes its own, the parent keeps its."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

from common.per_process import PerProcess


def in_child(check: Callable[[], bool]) -> bool:
    """Whether ``check()`` is true in a forked child (which is killed if it hangs for 5 s)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.close(read)
        signal.alarm(5)
        try:
            answer = b"1" if check() else b"0"
        except BaseException:
            answer = b"0"
        os.write(write, answer)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        answer = pipe.read()
    os.waitpid(pid, 0)
    return answer == b"1"


def test_a_value_is_made_once_per_process_and_a_forked_child_makes_its_own() -> None:
    made: list[int] = []
    holder = PerProcess(lambda: made.append(os.getpid()) or object())
    assert made == []
    first = holder.get()
    assert holder.get() is first and made == [os.getpid()]

    # The child made one value of its own (its copy of ``made`` gains its pid) and keeps it.
    assert in_child(lambda: holder.get() is not first and holder.get() is holder.get() and made[1:] == [os.getpid()])
    assert holder.get() is first and made == [os.getpid()]


def test_a_fork_while_another_thread_makes_the_value_leaves_the_child_free_to_make_its_own() -> None:
    parent, making, release = os.getpid(), threading.Event(), threading.Event()

    def make() -> str:
        if os.getpid() == parent:
            making.set()
            release.wait(10)  # holds the holder's lock until the child has been forked
            return "parent's"
        return "child's"

    holder = PerProcess(make)
    thread = threading.Thread(target=holder.get)
    thread.start()
    assert making.wait(10)
    try:
        assert in_child(lambda: holder.get() == "child's")
    finally:
        release.set()
        thread.join(10)
    assert holder.get() == "parent's"
