"""CPU time of the processes behind a benchmark, read from Linux's ``/proc``.

``bench_retrieve`` reports, besides latency, how many milliseconds of CPU a request costs the
web workers and the database backends that answered it. Over HTTP on a full machine that is what
decides throughput and queueing, and it moves less with the machine's phase than latency does
(docs/adr/0053-benchmark-method.md). Where ``/proc`` is missing, or the database runs on another
host, the figures are left out (None), never guessed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import connection

PROC = "/proc"


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state, parent, ...), or None when
    the process is gone. The name may hold spaces and parentheses: the fields start after the last ')'."""
    try:
        with open(f"{PROC}/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (all its threads), or None when it is gone."""
    fields = _stat(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """The processes ``pid`` started and theirs (a gunicorn master's workers, Celery's pool)."""
    try:
        names = [name for name in os.listdir(PROC) if name.isdigit()]
    except OSError:
        return []
    found: list[int] = []
    for name in names:
        fields = _stat(int(name))
        if fields is not None and int(fields[1]) == pid:
            found += [int(name), *descendants(int(name))]
    return found


def database_backends() -> list[int]:
    """The server processes serving this database's sessions, when they run on this machine."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'"
        )
        pids = [int(row[0]) for row in cursor.fetchall()]
    # A server on another host numbers its processes apart from ours: keep a pid only when this
    # machine's process of that number is a Postgres server process.
    return [pid for pid in pids if _command(pid) == "postgres"]


def _command(pid: int) -> str | None:
    try:
        with open(f"{PROC}/{pid}/comm") as comm:
            return comm.read().strip()
    except OSError:
        return None


@dataclass
class CpuWindow:
    """CPU spent by the web workers and the database backends between ``start`` and ``stop``."""

    web_pids: list[int]
    before: dict[int, float] = field(default_factory=dict)

    def start(self) -> CpuWindow:
        self.before = self._read([*self.web_pids, *database_backends()])
        return self

    def stop(self, requests: int) -> dict[str, object]:
        """Milliseconds of CPU a request: the web workers together and each, and the backends.

        A backend that connected meanwhile counts from zero (its whole life is in the window).
        """
        web = self._spent(self.web_pids)
        backends = database_backends()
        per = max(requests, 1)
        return {
            "web": None if not web else round(sum(web) * 1000 / per, 2),
            "web_workers": [round(value * 1000 / per, 2) for value in web],
            "db": None if not backends else round(sum(self._spent(backends)) * 1000 / per, 2),
        }

    def _spent(self, pids: Iterable[int]) -> list[float]:
        now = self._read(pids)
        return [now[pid] - self.before.get(pid, 0.0) for pid in now]

    @staticmethod
    def _read(pids: Iterable[int]) -> dict[int, float]:
        return {pid: seconds for pid in pids if (seconds := cpu_seconds(pid)) is not None}
