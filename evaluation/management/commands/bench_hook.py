"""python manage.py bench_hook: what ``memoryhub hook UserPromptSubmit`` adds to a user's prompt.

A coding agent starts the hook as a process of its own for every prompt and waits for it, so what
the user feels is that process's wall time: starting Python, importing, one ``POST /retrieve``,
printing. This command starts the installed console script as Claude Code does (the event's JSON
payload on standard input; ``MEMORYHUB_URL``, ``MEMORYHUB_API_KEY`` and ``MEMORYHUB_USER`` in its
environment) ``--runs`` times, each with a new prompt, and reports in milliseconds:

- ``hook``: the hook process's wall time, from starting it until it has exited, and
  ``hook_cpu``: the CPU time it used (user and system), steadier than wall time on a machine
  that other work shares;
- ``engine``: the server's own time for those same requests (``RetrievalLog.latency_ms`` of each
  hook's query), so what the hook itself costs is visible;
- ``http``: the same request from this process on a fresh connection, one after each hook run
  (another prompt: the hook's own would be a cached turn): the round trip with the framework;
- ``python``: the same interpreter doing nothing (``python -c pass``), the floor of any hook;
- ``unreachable``: the hook against a closed port, and ``silent``: against a port that accepts
  connections and never answers. Both must stay within the hook's timeout.

The server is gunicorn as ``make run`` configures it (``evaluation.harness.Service``) on this
process's Postgres and Redis, unless ``--url`` names a server already running on the same
database. The memories are a ``bench-hook`` project's, ``--memories`` of them for one user,
kept between runs; the prompts are other sentences of the same generator. The project's
retrieval rate limit is off: the bench asks faster than a person types, and a limited retrieve
answers at once with nothing, which would flatter the figures.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import resource
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from memoryhub_client.cli.hooks import retrieve_body

from evaluation import machine
from evaluation.harness import Service, free_port
from evaluation.metrics import percentile
from evaluation.synthetic import varied_memories
from memories import services, tenancy
from memories.models import EmbeddingStatus, Memory, Project
from retrieval.models import RetrievalLog
from retrieval.ranking.keyword_stats import settle_after_bulk_load
from retrieval.vectors.memory_vectors import embed_memories

PROJECT = "bench-hook"
USER = "bench-hook-user"
EVENT = "UserPromptSubmit"
# A Claude Code UserPromptSubmit payload as the agent writes it (its documented fields).
PAYLOAD = {
    "session_id": "5b0e7d2a-1c4f-4e8a-9f3d-7a2c6e1b9d40",
    "transcript_path": "/home/dev/.claude/projects/-home-dev-src-payments/5b0e7d2a.jsonl",
    "cwd": "/home/dev/src/payments",
    "permission_mode": "default",
    "hook_event_name": EVENT,
}
WARM_UP_RUNS = 6


class Command(BaseCommand):
    help = "Measure the wall time `memoryhub hook UserPromptSubmit` adds to a prompt, against a live server."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runs", type=int, default=50, help="timed hook runs (and as many HTTP requests)")
        parser.add_argument("--memories", type=int, default=1000, help="the bench user's memories")
        parser.add_argument("--url", help="a server already running on this database (default: start gunicorn)")
        parser.add_argument("--silent-runs", type=int, default=5, help="runs against a server that never answers")
        parser.add_argument("--seed", type=int, help="the prompts' seed (default: a new one each run)")
        parser.add_argument(
            "--hook-command",
            help="the command to time (default: the memoryhub script beside this Python, else on PATH)",
        )
        parser.add_argument(
            "--hook-env", action="append", default=[], metavar="NAME=VALUE", help="more environment for the hook"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        runs = options["runs"]
        if runs < 1:
            raise CommandError("--runs must be at least 1")
        command = hook_command(options["hook_command"])
        project = seed(options["memories"], log=self.stderr.write)
        _, key = tenancy.api_key_create(project=project, name="bench-hook")
        report: dict[str, Any] = {
            "machine": machine.describe(),
            "command": command,
            "memories": project.memories.count(),
            "runs": runs,
        }
        self.stderr.write(f"machine: {machine.summary(report['machine'])}")
        with tempfile.TemporaryDirectory() as state, served(options["url"]) as url:
            env = hook_env(url, key, state, extra=options["hook_env"])
            report["timeout_s"] = float(env.get("MEMORYHUB_HOOK_TIMEOUT", "1"))
            # Prompts and a session no earlier run asked: a repeated prompt is answered from the
            # server's per-turn cache, and its query's vectors from the vector cache.
            report["prompt_seed"] = options["seed"] or random.SystemRandom().randrange(1000, 1_000_000)
            texts = varied_memories(2 * (runs + WARM_UP_RUNS), seed=report["prompt_seed"])
            session = str(uuid.uuid4())
            prompts = [{**PAYLOAD, "session_id": session, "prompt": f"{t.rstrip('.')}?"} for t in texts]
            for prompt in prompts[: 2 * WARM_UP_RUNS]:  # every web worker has read the user's vectors
                run_hook(command, env, prompt)
            report.update(measure(command, env, url, key, prompts[2 * WARM_UP_RUNS :], project=project))
            report["python"] = summarise([time_process([sys.executable, "-c", "pass"], env) for _ in range(runs)])
            closed = {**env, "MEMORYHUB_URL": f"http://127.0.0.1:{free_port()}"}
            report["unreachable"] = summarise([run_hook(command, closed, p)[0] for p in prompts[:runs]])
            with silent_server() as silent:
                quiet = {**env, "MEMORYHUB_URL": silent}
                silent_runs = prompts[: options["silent_runs"]]
                report["silent"] = summarise([run_hook(command, quiet, p)[0] for p in silent_runs])
        report["hook_overhead_p50"] = round(report["hook"]["p50"] - report["http"]["p50"], 1)
        for name in ("hook", "hook_cpu", "engine", "http", "python", "unreachable", "silent"):
            self.stderr.write(f"{name}: {report[name]}")
        self.stdout.write(json.dumps(report, indent=2))


def hook_command(given: str | None) -> list[str]:
    """The hook as an agent's settings name it: ``memoryhub hook UserPromptSubmit``."""
    if given:
        return [*shlex.split(given), "hook", EVENT]
    beside = Path(sys.executable).with_name("memoryhub")
    found = str(beside) if beside.exists() else shutil.which("memoryhub")
    if found is None:
        raise CommandError("no memoryhub command: install clients/python, or name it with --hook-command")
    return [found, "hook", EVENT]


def hook_env(url: str, key: str, state: str, *, extra: Sequence[str] = ()) -> dict[str, str]:
    """This process's environment (an agent passes on its own) with the hook's server, key and
    user; its state and log in ``state``, and no configuration file of the person running this.

    Bytecode is cached (in ``state``, not beside the sources): an installed package has it, as
    pip compiles on installing. Compiling the client's modules anew on every run (what
    ``PYTHONDONTWRITEBYTECODE`` does to an editable install) cost the hook 5-7 ms CPU more."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"MEMORYHUB_URL": url, "MEMORYHUB_API_KEY": key, "MEMORYHUB_USER": USER}
    env |= {"MEMORYHUB_STATE_DIR": state, "MEMORYHUB_CONFIG": str(Path(state) / "no-config.json")}
    env["PYTHONPYCACHEPREFIX"] = str(Path(state) / "pycache")
    for item in extra:
        name, separator, value = item.partition("=")
        if not separator or not name:
            raise CommandError(f"--hook-env wants NAME=VALUE, not {item!r}")
        env[name] = value
    return env


def seed(count: int, *, log: Any) -> Project:
    """The bench project with ``count`` memories of one user, embedded; reused when it has them."""
    project = tenancy.project_get_or_create(slug=PROJECT)
    project.retrieval_rate_limit = 0
    project.save(update_fields=["retrieval_rate_limit"])
    texts = varied_memories(count, seed=7)
    if count and project.memories.count() == count and project.memories.filter(content=texts[-1]).exists():
        return project
    project.memories.all().delete()
    memories = Memory.objects.bulk_create(
        Memory(
            project=project,
            user_id=USER,
            content=text,
            content_hash=services.content_hash(text),
            created_by="system:bench",
            embedding_status=EmbeddingStatus.PENDING,
        )
        for text in texts
    )
    embed_memories(memories)
    settle_after_bulk_load(project.pk)
    log(f"seeded {len(memories)} memories")
    return project


@contextmanager
def served(url: str | None) -> Iterator[str]:
    """``url``, or gunicorn as ``make run`` starts it, on a free loopback port, once it answers."""
    if url:
        yield url.rstrip("/")
        return
    with Service(worker=False, ready="answering") as service:
        yield f"http://127.0.0.1:{service.port}"


def measure(
    command: list[str], env: dict[str, str], url: str, key: str, prompts: list[dict[str, str]], *, project: Project
) -> dict[str, Any]:
    """The hook runs, each followed by one request of the same shape from this process."""
    hook, cpu, http, answered, queries = [], [], [], 0, []
    since = timezone.now()
    for hook_prompt, http_prompt in zip(prompts[::2], prompts[1::2], strict=True):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        elapsed, output = run_hook(command, env, hook_prompt)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        hook.append(elapsed)
        cpu.append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000)
        answered += bool(output.strip())
        queries.append(hook_prompt["prompt"])
        http.append(post_retrieve(url, key, retrieve_body(USER, EVENT, http_prompt, env)))
    engine, cached = engine_times(project, queries, since=since)
    return {
        "hook": summarise(hook),
        "hook_cpu": summarise(cpu),
        "answered_with_context": answered,
        "engine": summarise(engine),
        "engine_cached": cached,
        "http": summarise(http),
    }


def run_hook(command: list[str], env: dict[str, str], payload: dict[str, str]) -> tuple[float, str]:
    """Milliseconds from starting the hook with ``payload`` until it exited, and what it printed."""
    stdin = json.dumps(payload).encode()
    started = time.perf_counter()
    done = subprocess.run(command, input=stdin, env=env, capture_output=True, timeout=30, check=False)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise CommandError(f"the hook exited {done.returncode}: {done.stderr.decode(errors='replace')[-500:]}")
    return elapsed, done.stdout.decode()


def time_process(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=env, capture_output=True, timeout=30, check=True)
    return (time.perf_counter() - started) * 1000


def post_retrieve(url: str, key: str, body: dict[str, Any]) -> float:
    """Milliseconds for one ``POST /retrieve`` on a new connection, as the hook makes it."""
    import http.client  # noqa: PLC0415 (this bench's client, not the hook's)

    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", "Connection": "close"}
    started = time.perf_counter()
    connection = kind(parts.hostname or "localhost", parts.port, timeout=30)
    try:
        connection.request("POST", f"{parts.path}/api/v1/retrieve", body=json.dumps(body), headers=headers)
        response = connection.getresponse()
        response.read()
    finally:
        connection.close()
    if response.status != 200:
        raise CommandError(f"POST /retrieve answered {response.status}")
    return (time.perf_counter() - started) * 1000


def engine_times(project: Project, queries: list[str], *, since: datetime) -> tuple[list[float], int]:
    """The server's own time for each query since ``since`` (the retrieval log keeps its hash,
    written before the answer), and how many it answered from its cache."""
    hashes = {hashlib.sha256(q.encode()).hexdigest() for q in queries}
    rows = RetrievalLog.objects.filter(project=project, user_id=USER, query_hash__in=hashes, created_at__gte=since)
    found = {row.query_hash: (row.latency_ms, row.cached) for row in rows}
    return [ms for ms, _ in found.values()], sum(cached for _, cached in found.values())


def summarise(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "p50": round(percentile(values, 50) or 0, 1),
        "p95": round(percentile(values, 95) or 0, 1),
        "max": round(max(values), 1),
    }


@contextmanager
def silent_server() -> Iterator[str]:
    """A port whose connections the kernel accepts (the listen backlog) and nobody answers."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        yield f"http://127.0.0.1:{silent.getsockname()[1]}"
