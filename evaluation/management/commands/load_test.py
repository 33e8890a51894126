"""python manage.py load_test: a bounded mixed load on loopback, with memory growth per process.

Starts gunicorn (configured like ``make run``) and a Celery worker on this home's servers,
creates ``--tenants`` projects with ``--users`` users each and a few memories per user, then
runs ``--clients`` threads for ``--seconds``: 70 % retrieve, 20 % create, 10 % capture.
Reports requests/s, errors, p50/p95 per kind, and each process's RSS at the start and the end
of the run (sampled every ``--sample`` seconds). Prints a table and one JSON line.
"""

from __future__ import annotations

import json
import random
import statistics
import threading
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from evaluation.harness import Service, rss_mib
from evaluation.synthetic import synthetic_sentences
from memories import tenancy


class Command(BaseCommand):
    help = "Bounded mixed load (retrieve/create/capture) on loopback: req/s, p95, errors, RSS growth."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seconds", type=int, default=120)
        parser.add_argument("--clients", type=int, default=4)
        parser.add_argument("--tenants", type=int, default=3)
        parser.add_argument("--users", type=int, default=5)
        parser.add_argument("--sample", type=int, default=10, help="seconds between RSS samples")
        parser.add_argument(
            "--warmup", type=int, default=30, help="seconds before the first RSS sample (models load, pools fill)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        keys = []
        for n in range(options["tenants"]):
            project = tenancy.project_get_or_create(slug=f"load-{n}", team_slug="load")
            project.retrieval_rate_limit = 0
            project.save(update_fields=["retrieval_rate_limit"])
            keys.append(tenancy.api_key_create(project=project, name="load")[1])
        texts = synthetic_sentences(2000, seed=7, tag="load")
        with Service(worker=True) as service:
            for key in keys:
                for user in range(options["users"]):
                    items = [{"user_id": f"u{user}", "content": t} for t in texts[user * 10 : user * 10 + 10]]
                    service.call("POST", "/api/v1/memories/bulk", {"memories": items}, key=key)
            result = self._run(service, keys, texts, options)
        self.stdout.write(_table(result))
        self.stdout.write(json.dumps(result))

    def _run(self, service: Service, keys: list[str], texts: list[str], options: dict[str, Any]) -> dict[str, Any]:
        latencies: dict[str, list[float]] = {"retrieve": [], "create": [], "capture": []}
        errors: dict[str, int] = {}
        lock = threading.Lock()
        stop = time.monotonic() + options["seconds"]
        samples: list[tuple[float, dict[str, float | None]]] = []

        def sample() -> dict[str, float | None]:
            return {f"{name}:{pid}": rss_mib(pid) for name, pids in service.pids().items() for pid in pids}

        def client(seed: int) -> None:
            rng = random.Random(seed)
            while time.monotonic() < stop:
                key, user, text = rng.choice(keys), f"u{rng.randrange(options['users'])}", rng.choice(texts)
                roll = rng.random()
                body: dict[str, Any]
                if roll < 0.7:
                    kind, path = "retrieve", "/api/v1/retrieve"
                    body = {"user_id": user, "query": text}
                elif roll < 0.9:
                    kind, path = "create", "/api/v1/memories"
                    body = {"user_id": user, "content": f"{text} ({seed}-{time.monotonic_ns()})"}
                else:
                    kind, path = "capture", "/api/v1/capture"
                    body = {
                        "user_id": user,
                        "trigger": "turn",
                        "messages": [{"role": "user", "content": f"I use {text}"}],
                    }
                started = time.perf_counter()
                status: int | str
                try:
                    status, _ = service.call("POST", path, body, key=key)
                except OSError as error:
                    status = type(error).__name__
                elapsed = (time.perf_counter() - started) * 1000
                with lock:
                    if status in (200, 201, 202):
                        latencies[kind].append(elapsed)
                    else:
                        errors[f"{kind} {status}"] = errors.get(f"{kind} {status}", 0) + 1

        threads = [threading.Thread(target=client, args=(n,)) for n in range(options["clients"])]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        while any(t.is_alive() for t in threads):
            time.sleep(min(options["sample"], max(0.1, stop - time.monotonic())))
            samples.append((time.monotonic() - started, sample()))
        seconds = time.monotonic() - started
        total = sum(len(v) for v in latencies.values())
        warm = [s for at, s in samples if at >= options["warmup"]] or [samples[-1][1]]
        first, last = warm[0], samples[-1][1]
        return {
            "seconds": round(seconds, 1),
            "clients": options["clients"],
            "tenants": len(keys),
            "requests_ok": total,
            "errors": errors,
            "requests_per_second": round(total / seconds, 1),
            "latency_ms": {k: _percentiles(v) for k, v in latencies.items()},
            "rss_mib": {p: {"after_warmup": first.get(p), "end": last.get(p)} for p in last},
            "warmup_seconds": options["warmup"],
        }


def _percentiles(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "p50": None, "p95": None}
    ordered = sorted(values)
    return {
        "n": len(values),
        "p50": round(statistics.median(values), 1),
        "p95": round(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], 1),
    }


def _table(result: dict[str, Any]) -> str:
    lines = [
        f"load: {result['clients']} clients, {result['tenants']} tenants, {result['seconds']} s",
        f"  ok requests {result['requests_ok']}  ({result['requests_per_second']} req/s)  errors {result['errors']}",
    ]
    for kind, figures in result["latency_ms"].items():
        lines.append(f"  {kind:9} n {figures['n']:6}  p50 {figures['p50']} ms  p95 {figures['p95']} ms")
    for process, rss in result["rss_mib"].items():
        lines.append(f"  RSS {process:22} {rss['after_warmup']} -> {rss['end']} MiB")
    return "\n".join(lines)
