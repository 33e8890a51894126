"""python manage.py bench_capture: POST /capture latency over real HTTP, and rule-based jobs/s.

1. **Throughput.** Starts one Celery worker process (solo pool, no LLM configured, so the
   rule-based extractor runs), warms it up with one job, then submits ``--jobs`` capture jobs
   (one user each, so none coalesce or wait for a lock) through the same service the API
   uses and measures from the first submit until every job is ``done``. The worker also runs
   the embedding tasks those jobs queue, as it would in production.
2. **Latency.** Starts gunicorn as ``make run`` does (``serving.gunicorn_conf``, through
   ``evaluation.harness.Service``) on a free loopback port and sends ``--requests`` POST
   /api/v1/capture requests from ``--clients`` threads, each with its own keep-alive
   ``http.client`` connection; reports p50/p95/p99.

Everything happens in a ``bench-capture`` project that is deleted afterwards, and the Celery
messages of the jobs the latency phase accepted (no worker runs them) are taken out of the queue.
Run it with no other worker consuming the same Redis queue, or that worker will share the
throughput phase.
"""

from __future__ import annotations

import http.client
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import current_app as app
from django.core.management.base import BaseCommand, CommandParser

from capture import services
from capture.models import CaptureJob, JobStatus
from common.redis import redis_client
from evaluation import machine
from evaluation.harness import Service
from memories.models import Project
from memories.tenancy import api_key_create, project_get_or_create

PROJECT = "bench-capture"
WINDOW = [
    {"role": "user", "content": "Hi! I'm Dana and I work at Acme as a backend engineer."},
    {"role": "assistant", "content": "Nice to meet you, Dana. How can I help?"},
    {"role": "user", "content": "I prefer pytest fixtures over setUp methods, and we use Postgres 16 here."},
    {"role": "assistant", "content": "Got it: pytest fixtures, Postgres 16."},
    {"role": "user", "content": "Remember that our deploys go out on Tuesdays only."},
    {"role": "assistant", "content": "Noted."},
]


class Command(BaseCommand):
    help = "Measure POST /capture latency over HTTP (gunicorn) and rule-based capture jobs per second."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--requests", type=int, default=1000, help="POST /capture requests")
        parser.add_argument("--clients", type=int, default=2, help="concurrent HTTP clients")
        parser.add_argument("--jobs", type=int, default=200, help="jobs for the throughput phase")
        parser.add_argument("--skip-worker", action="store_true", help="only measure HTTP latency")

    def handle(self, *args: Any, **options: Any) -> None:
        Project.objects.filter(slug=PROJECT).delete()
        project = project_get_or_create(slug=PROJECT)
        report: dict[str, Any] = {"machine": machine.describe()}
        accepted: list[str] = []
        try:
            if not options["skip_worker"]:
                report["rules_throughput"] = measure_throughput(project, jobs=options["jobs"], log=self.stderr.write)
                self.stderr.write(f"throughput: {report['rules_throughput']}")
            _, key = api_key_create(project=project, name="bench")
            # gunicorn as `make run` serves (serving.gunicorn_conf), without a Celery worker: the jobs
            # stay queued and are deleted with the project. Timed once a web worker answers (its
            # start-up, model loading included, is not in the first acks).
            with Service(worker=False, ready="answering") as service:
                report["post_capture"] = measure_latency(
                    service.port, key, requests=options["requests"], clients=options["clients"], jobs=accepted
                )
            self.stderr.write(f"latency: {report['post_capture']}")
        finally:
            Project.objects.filter(slug=PROJECT).delete()
            # No worker ran the accepted jobs: their nudges would stay in the broker's queue for good,
            # and a queue grown by every run made the next runs slower (Redis rewrites its log whole).
            drop_nudges(accepted)
        self.stdout.write(json.dumps(report, indent=2))


def submit(project: Project, user_id: str) -> str:
    job = services.capture_submit(
        project=project, user_id=user_id, session_id="bench", trigger="turn", messages=WINDOW, actor="system:bench"
    )
    return str(job.pk)


def wait_done(ids: list[str], *, timeout: float) -> int:
    """Wait until every job is finished; returns how many are ``done``."""
    deadline = time.monotonic() + timeout
    unfinished = CaptureJob.objects.filter(pk__in=ids, status__in=services.UNFINISHED)
    while unfinished.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return CaptureJob.objects.filter(pk__in=ids, status=JobStatus.DONE).count()


def measure_throughput(project: Project, *, jobs: int, log: Any) -> dict[str, Any]:
    with worker():
        started = time.monotonic()
        if not wait_done([submit(project, "warm-up")], timeout=120):
            raise RuntimeError("the worker did not finish the warm-up job")
        log(f"worker ready in {time.monotonic() - started:.1f}s; submitting {jobs} jobs")
        started = time.monotonic()
        ids = [submit(project, f"user-{n}") for n in range(jobs)]
        queued = time.monotonic() - started
        done = wait_done(ids, timeout=600)
        elapsed = time.monotonic() - started
    memories = project.memories.exclude(user_id="warm-up").count()
    return {
        "jobs": jobs,
        "done": done,
        "memories_written": memories,
        "submit_seconds": round(queued, 2),
        "seconds": round(elapsed, 2),
        "jobs_per_second": round(done / elapsed, 1),
    }


@contextmanager
def worker() -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "MEMORYHUB_LLM_BASE_URL": "", "OPENAI_API_KEY": ""}
    command = [sys.executable, "-m", "celery", "-A", "memoryhub", "worker", "--pool", "solo", "--loglevel", "WARNING"]
    process = subprocess.Popen([*command, "--without-gossip", "--without-mingle", "--without-heartbeat"], env=env)
    try:
        yield process
    finally:
        process.terminate()
        process.wait(30)


def drop_nudges(job_ids: list[str]) -> int:
    """Take the Celery messages of ``job_ids`` out of the broker's queue; how many were taken."""
    wanted = {f"('{job_id}',)" for job_id in job_ids}
    client, queue = redis_client(), app.conf.task_default_queue
    dropped = 0
    for raw in client.lrange(queue, 0, -1):
        headers = json.loads(raw).get("headers") or {}
        if headers.get("task") == services.CAPTURE_JOB_TASK and headers.get("argsrepr") in wanted:
            dropped += int(client.lrem(queue, 1, raw))  # type: ignore[arg-type]  # bytes, as read
    return dropped


def measure_latency(
    port: int, key: str, *, requests: int, clients: int, jobs: list[str] | None = None
) -> dict[str, Any]:
    """POST /capture latency from ``clients`` keep-alive connections; the accepted job ids go to ``jobs``."""
    latencies: list[float] = []
    errors: list[int] = []
    lock = threading.Lock()

    def client(index: int, count: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        for n in range(count):
            body = json.dumps({"user_id": f"u{index}-{n}", "session_id": "s", "trigger": "turn", "messages": WINDOW})
            started = time.perf_counter()
            connection.request("POST", "/api/v1/capture", body=body, headers=headers)
            response = connection.getresponse()
            answer = response.read()
            elapsed = (time.perf_counter() - started) * 1000
            with lock:
                if response.status == 202:
                    latencies.append(elapsed)
                    if jobs is not None:
                        jobs.append(json.loads(answer)["job_id"])
                else:
                    errors.append(response.status)
        connection.close()

    for warm in range(20):  # connections, imports and the key lookup of both gunicorn workers
        client(1000 + warm, 1)
    latencies.clear()
    per_client = requests // clients
    threads = [threading.Thread(target=client, args=(i, per_client)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    ordered = sorted(latencies)
    return {
        "requests": len(ordered),
        "errors": len(errors),
        "clients": clients,
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1], 2),
        "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1], 2),
        "max_ms": round(ordered[-1], 2),
        "requests_per_second": round(len(ordered) / wall, 1),
    }
