"""python manage.py drills (``make drills``): fault drills against a running service, with counts.

Starts gunicorn, a Celery worker and beat on this home's embedded servers (capture sweeper
timers lowered so a drill ends in minutes) and runs, one after the other:

- ``postgres-bulk``: Postgres stopped for a few seconds, then started, while a client posts
  bulk writes (retrying what failed, as a client should);
- ``postgres-capture``: the same while captures are submitted and processed;
- ``redis-capture``: Redis stopped while captures are submitted (the broker is gone: the jobs
  wait in Postgres and the sweeper queues them when Redis is back);
- ``redis-retrieve``: Redis stopped during retrieves (cache and rate limit degrade; answers
  must still come);
- ``worker-kill``: the Celery worker SIGKILLed while it works through captures, then started.

After each: acknowledged writes or captures that were lost, duplicate memories, memories still
without an embedding once the sweepers had their turn, requests that failed, and the seconds
until ``/health`` was green again without a manual step. Prints a table and one JSON line.
Uses only the embedded servers (``DATABASE_URL``/``REDIS_URL`` unset).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from capture.models import CaptureJob
from evaluation.harness import Service
from memories import tenancy
from memories.models import Memory, Project
from serving import embedded

DRILLS = ["postgres-bulk", "postgres-capture", "redis-capture", "redis-retrieve", "worker-kill"]
# Run only when asked (``make drills-disk``): it needs the home on a small filesystem of its own.
ON_REQUEST = ["disk-full"]
ENV = {
    "MEMORYHUB_CAPTURE_REQUEUE_QUEUED_AFTER": "5",
    "MEMORYHUB_CAPTURE_REQUEUE_RUNNING_AFTER": "20",
}
OUTAGE_SECONDS = 4.0
WAIT_SECONDS = 150.0


class Command(BaseCommand):
    help = "Fault drills (Postgres/Redis outages, worker crash) against a live service; counts what was lost."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--only", nargs="*", choices=DRILLS + ON_REQUEST, help="run only these drills")

    def handle(self, *args: Any, **options: Any) -> None:
        # A SIGTERM (Ctrl-C's cousin) still stops the children the harness started.
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
        home = Path(settings.MEMORYHUB_HOME)
        if os.environ.get("DATABASE_URL") != embedded.database_url(home) or os.environ.get(
            "REDIS_URL"
        ) != embedded.redis_url(home):
            raise CommandError("drills stop and start the embedded servers: unset DATABASE_URL and REDIS_URL")
        project = tenancy.project_get_or_create(slug=f"drills-{uuid.uuid4().hex[:6]}", team_slug="drills")
        project.retrieval_rate_limit = 0
        project.save(update_fields=["retrieval_rate_limit"])
        key = tenancy.api_key_create(project=project, name="drills")[1]
        results = []
        with Service(worker=True, beat=True, env=ENV) as service:
            drill = Drill(service, key, home, project.pk)
            for name in options["only"] or DRILLS:
                self.stderr.write(f"drill {name}…")
                results.append({"drill": name, **getattr(drill, name.replace("-", "_"))()})
        self.stdout.write(_table(results))
        self.stdout.write(json.dumps(results))


class Drill:
    def __init__(self, service: Service, key: str, home: Path, project_id: int) -> None:
        self.service, self.key, self.home, self.project_id = service, key, home, project_id
        self.failed_attempts = 0  # requests that failed and were sent again: the outage was felt

    # --- the drills ---------------------------------------------------------------------------

    def postgres_bulk(self) -> dict[str, Any]:
        tag = f"bulk-{uuid.uuid4().hex[:6]}"
        batches = [[{"user_id": "drill-bulk", "content": f"{tag} fact {b}-{i}."} for i in range(10)] for b in range(30)]
        acked: list[str] = []
        failed = 0

        def client() -> None:
            nonlocal failed
            for batch in batches:
                time.sleep(0.2)  # spread the writes over the outage
                if self._retry("POST", "/api/v1/memories/bulk", {"memories": batch}, ok=(201,)):
                    acked.extend(item["content"] for item in batch)
                else:
                    failed += 1

        healthy = self._during_outage(client, lambda: embedded.stop_postgres(self.home), self._start_postgres)
        felt = self.failed_attempts
        return {
            **self._memories_check(tag, acked),
            "failed_attempts_retried": felt,
            "requests_given_up": failed,
            "healthy_again_s": healthy,
        }

    def postgres_capture(self) -> dict[str, Any]:
        stop, start = (lambda: embedded.stop_postgres(self.home)), self._start_postgres
        return self._captures_during_outage(stop, start, count=20, says="I live in Town{n}x{tag}.")

    def redis_capture(self) -> dict[str, Any]:
        stop, start = (lambda: embedded.stop_redis(self.home)), self._start_redis
        return self._captures_during_outage(stop, start, count=15, says="I work at Shop{n}x{tag}.")

    def _captures_during_outage(
        self, stop: Callable[[], None], start: Callable[[], None], *, count: int, says: str
    ) -> dict[str, Any]:
        jobs: list[tuple[str, str]] = []
        tag = uuid.uuid4().hex[:6]

        def client() -> None:
            for n in range(count):
                answer = self._capture(f"drill-{tag}-{n}", says.format(n=n, tag=tag))
                if answer:
                    jobs.append(answer)
                time.sleep(0.2)

        healthy = self._during_outage(client, stop, start)
        felt = self.failed_attempts
        return {
            **self._captures_check(jobs, expected=count),
            "failed_attempts_retried": felt,
            "healthy_again_s": healthy,
        }

    def _capture(self, user: str, text: str) -> tuple[str, str] | None:
        body = {"user_id": user, "trigger": "turn", "messages": [{"role": "user", "content": text}]}
        answer = self._retry("POST", "/api/v1/capture", body, ok=(202,))
        return (answer["job_id"], user) if answer else None

    def redis_retrieve(self) -> dict[str, Any]:
        statuses: Counter[str] = Counter()
        degraded: Counter[str] = Counter()

        def client() -> None:
            for n in range(40):
                status: int | str
                try:
                    ask = {"user_id": "drill-bulk", "query": f"fact {n}", "turn_id": f"turn-{n % 5}"}
                    status, body = self.service.call("POST", "/api/v1/retrieve", ask, key=self.key)
                except OSError as error:
                    status, body = type(error).__name__, None
                statuses[str(status)] += 1
                for stage in (body or {}).get("degraded", []) if isinstance(body, dict) else []:
                    degraded[stage] += 1
                time.sleep(0.15)

        # The per-user rate limit and the per-turn cache both live in Redis: turn them on.
        Project.objects.filter(pk=self.project_id).update(retrieval_rate_limit=10_000)
        healthy = self._during_outage(client, lambda: embedded.stop_redis(self.home), self._start_redis)
        return {"retrieves": dict(statuses), "degraded": dict(degraded), "healthy_again_s": healthy}

    def worker_kill(self) -> dict[str, Any]:
        jobs: list[tuple[str, str]] = []
        tag = uuid.uuid4().hex[:6]
        in_flight = 0
        for n in range(60):
            answer = self._capture(f"drill-wk-{tag}-{n}", f"My dog is called Rex{n}x{tag}.")
            if answer:
                jobs.append(answer)
            if n == 30:  # mid-stream: some jobs done, some queued or running
                connection.close()
                unfinished = CaptureJob.objects.filter(project_id=self.project_id, status__in=("queued", "running"))
                in_flight = unfinished.count()
                self.service.kill("worker")
        time.sleep(2)
        self.service.start("worker")  # /health does not cover workers: the jobs' outcome is the figure
        checked = self._captures_check(jobs, expected=60)
        return {**checked, "unfinished_at_kill": in_flight}

    def disk_full(self) -> dict[str, Any]:
        """The embedded servers' filesystem fills up while memories are written, then frees."""
        total = os.statvfs(self.home).f_blocks * os.statvfs(self.home).f_frsize
        if total > 1024**3:
            raise CommandError(
                f"{self.home} is on a {total >> 20} MiB filesystem: run this drill via `make drills-disk`"
            )
        acked: list[str] = []
        tag = uuid.uuid4().hex[:6]
        for n in range(20):
            status, body = self.service.call("POST", "/api/v1/memories", self._fact(tag, n), key=self.key)
            if status == 201:
                acked.append(body["id"])
        filler = self.home / "filler"
        _fill(filler)
        statuses: Counter[str] = Counter()
        enveloped = 0
        for n in range(20, 80):
            try:
                status, body = self.service.call("POST", "/api/v1/memories", self._fact(tag, n), key=self.key)
            except OSError as error:
                statuses[type(error).__name__] += 1
                continue
            statuses[str(status)] += 1
            if status == 201:
                acked.append(body["id"])
            elif isinstance(body, dict) and "error" in body:
                enveloped += 1
            time.sleep(0.3)
        filler.unlink()
        freed = time.monotonic()
        healthy = self.service.wait_healthy(timeout=180)
        after = self._retry("POST", "/api/v1/memories", self._fact(tag, 999), ok=(201,))
        readable = 0
        for memory_id in acked:
            status, _ = self.service.call("GET", f"/api/v1/memories/{memory_id}?user_id=drill-disk", key=self.key)
            readable += status == 200
        return {
            "while_full": dict(statuses),
            "errors_in_envelope": enveloped,
            "acknowledged": len(acked),
            "lost": len(acked) - readable,
            "writes_after_freeing": "ok" if after else "failed",
            "healthy_again_s": round(max(healthy, time.monotonic() - freed), 1),
        }

    @staticmethod
    def _fact(tag: str, n: int) -> dict[str, str]:
        return {"user_id": "drill-disk", "content": f"{tag} disk fact number {n} " + "padding " * 40}

    # --- helpers ------------------------------------------------------------------------------

    def _during_outage(self, client: Callable[[], None], stop: Callable[[], None], start: Callable[[], None]) -> float:
        self.failed_attempts = 0
        thread = threading.Thread(target=client)
        thread.start()
        time.sleep(1.0)
        stop()
        time.sleep(OUTAGE_SECONDS)
        start()
        healthy = self.service.wait_healthy()  # seconds from the restart to a green /health
        thread.join()
        return round(healthy, 1)

    def _start_postgres(self) -> None:
        embedded.start_postgres(self.home)

    def _start_redis(self) -> None:
        embedded.start_redis(self.home)

    def _retry(self, method: str, path: str, body: Any, *, ok: tuple[int, ...], attempts: int = 60) -> Any:
        for _ in range(attempts):
            try:
                status, answer = self.service.call(method, path, body, key=self.key, timeout=15)
                if status in ok:
                    return answer or True
            except OSError:
                pass
            self.failed_attempts += 1
            time.sleep(0.5)
        return None

    def _memories_check(self, tag: str, acked: list[str]) -> dict[str, Any]:
        connection.close()
        stored = Counter(Memory.objects.filter(content__startswith=tag).values_list("content", flat=True))
        return {
            "acknowledged": len(acked),
            "lost": sum(1 for content in acked if content not in stored),
            "duplicates": sum(n - 1 for n in stored.values() if n > 1),
            "without_embedding": self._unembedded(Memory.objects.filter(content__startswith=tag)),
        }

    def _captures_check(self, jobs: list[tuple[str, str]], *, expected: int) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT_SECONDS
        finished: dict[str, str] = {}
        while time.monotonic() < deadline and len(finished) < len(jobs):
            for job_id, user in jobs:
                if job_id in finished:
                    continue
                try:
                    status, body = self.service.call("GET", f"/api/v1/capture/{job_id}?user_id={user}", key=self.key)
                except OSError:
                    continue
                if status == 200 and body["status"] in ("done", "failed", "coalesced"):
                    finished[job_id] = body["status"]
            time.sleep(1)
        connection.close()
        users = [user for _, user in jobs]
        memories = Memory.objects.filter(project_id=self.project_id, user_id__in=users)
        per_user = Counter(memories.values_list("user_id", "content"))
        return {
            "submitted": expected,
            "acknowledged": len(jobs),
            "lost": expected - sum(1 for s in finished.values() if s == "done"),
            "failed_jobs": sum(1 for s in finished.values() if s == "failed"),
            "memories": memories.count(),
            "duplicates": sum(n - 1 for n in per_user.values() if n > 1),
            "without_embedding": self._unembedded(memories),
        }

    def _unembedded(self, queryset: Any) -> int:
        """Memories not ``ready`` once the embedding sweeper (every 60 s) has had its turn."""
        deadline = time.monotonic() + 130
        while time.monotonic() < deadline:
            left = queryset.exclude(embedding_status="ready").count()
            if left == 0:
                return 0
            time.sleep(5)
        return int(queryset.exclude(embedding_status="ready").count())


def _fill(path: Path) -> None:
    """Write ``path`` until the filesystem is full (unbuffered, so nothing is left to flush)."""
    chunk = b"\0" * (1 << 20)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while len(chunk) >= 4096:
            try:
                os.write(descriptor, chunk)
            except OSError:
                chunk = chunk[: len(chunk) // 2]
    finally:
        os.close(descriptor)


def _table(results: list[dict[str, Any]]) -> str:
    lines = ["fault drills"]
    for result in results:
        figures = ", ".join(f"{k} {v}" for k, v in result.items() if k != "drill")
        lines.append(f"  {result['drill']:17} {figures}")
    return "\n".join(lines)
