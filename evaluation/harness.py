"""The processes and HTTP client that load runs and fault drills drive: gunicorn, a Celery
worker and beat, started from this process's settings (its ``MEMORYHUB_HOME`` servers)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Literal

from evaluation.process_cpu import descendants


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Service:
    """gunicorn (configured like `make run`), and optionally a Celery worker and beat.

    Entering waits until the service is ``ready``: ``healthy`` (/health answers 200: the worker
    too), ``answering`` (/health answers at all: a web worker has started and warmed up) or
    ``listening`` (the port accepts connections: gunicorn's master is up)."""

    def __init__(
        self,
        *,
        worker: bool = True,
        beat: bool = False,
        env: dict[str, str] | None = None,
        ready: Literal["healthy", "answering", "listening"] = "healthy",
    ) -> None:
        if ready not in ("healthy", "answering", "listening"):
            raise ValueError(f"unknown readiness {ready!r}")
        self.ready = ready
        self.port = free_port()
        self.env = {**os.environ, **(env or {})}
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.wanted = {"web": True, "worker": worker, "beat": beat}

    def command(self, name: str) -> list[str]:
        python = sys.executable
        if name == "web":
            return [
                python, "-m", "gunicorn", "memoryhub.wsgi:application", "--config", "python:serving.gunicorn_conf",
                "--bind", f"127.0.0.1:{self.port}", "--log-level", "warning",
            ]  # fmt: skip
        if name == "worker":
            return [python, "-m", "celery", "-A", "memoryhub", "worker", "--loglevel", "WARNING", "--concurrency", "2"]
        return [python, "-m", "celery", "-A", "memoryhub", "beat", "--loglevel", "WARNING"]

    def start(self, name: str) -> None:
        log = open(Path(self.env.get("MEMORYHUB_HOME", "/tmp")) / f"harness-{name}.log", "ab")  # noqa: SIM115
        self.processes[name] = subprocess.Popen(self.command(name), env=self.env, stdout=log, stderr=log)

    def __enter__(self) -> Service:
        for name, wanted in self.wanted.items():
            if wanted:
                self.start(name)
        if self.ready == "listening":
            self.wait_listening()
        else:
            self.wait_healthy(answering=self.ready == "answering")
        return self

    def wait_listening(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("gunicorn did not listen")

    def wait_healthy(self, timeout: float = 90, *, answering: bool = False) -> float:
        """Seconds until /health answers 200 (or, ``answering``, 200 or 503)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            try:
                status, _ = self.call("GET", "/api/v1/health", timeout=3)
                if status == 200 or (answering and status == 503):
                    return time.monotonic() - started
            except OSError:
                pass
            time.sleep(0.3)
        raise RuntimeError("the service did not become healthy")

    def kill(self, name: str) -> None:
        """SIGKILL (a crash, not a shutdown)."""
        process = self.processes[name]
        for pid in descendants(process.pid):
            os.kill(pid, signal.SIGKILL)
        process.kill()
        process.wait(30)

    def __exit__(self, *exc: object) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()

    def call(self, method: str, path: str, body: Any = None, *, key: str = "", timeout: float = 30) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            headers = {"Content-Type": "application/json"}
            if key:
                headers["Authorization"] = f"Bearer {key}"
            conn.request(method, path, None if body is None else json.dumps(body), headers)
            response = conn.getresponse()
            raw = response.read()
        finally:
            conn.close()
        try:
            return response.status, json.loads(raw) if raw else None
        except ValueError:
            return response.status, raw.decode(errors="replace")

    def pids(self) -> dict[str, list[int]]:
        """Each process and its children (gunicorn workers, Celery pool processes)."""
        return {name: [p.pid, *descendants(p.pid)] for name, p in self.processes.items() if p.poll() is None}


def rss_mib(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None
