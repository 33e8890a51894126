"""python manage.py reembed --model <name>: switch projects to another embedding model."""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories.models import Project
from retrieval.embedding import reembed
from retrieval.tasks import reembed_project_task
from retrieval.vectors.vector_index import vector_index_builds


def render_bar(done: int, total: int, started: float, width: int = 40) -> str:
    fraction = done / total if total else 1.0
    filled = int(width * fraction)
    rate = done / max(time.monotonic() - started, 1e-6)
    return f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} ({rate:.0f}/s)"


class Command(BaseCommand):
    help = "Build vectors with another model beside the old ones, then switch each project to it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", required=True, help="embedding model name, e.g. all-MiniLM-L6-v2")
        parser.add_argument("--project", help="one project slug (default: every project)")
        parser.add_argument("--inline", action="store_true", help="run here instead of in a Celery worker")
        parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait for the Celery job")

    def handle(self, *args: Any, **options: Any) -> None:
        projects = Project.objects.order_by("pk")
        if options["project"]:
            projects = projects.filter(slug=options["project"])
            if not projects.exists():
                raise CommandError(f"no project {options['project']!r}")
        for project in projects:
            self.stdout.write(f"{project.slug}: re-embedding with {options['model']}")
            if options["inline"]:
                self._inline(project, options["model"])
            else:
                self._via_celery(project, options["model"], options["timeout"])

    def _inline(self, project: Project, model: str) -> None:
        started = time.monotonic()
        result = reembed.reembed_project(
            project_id=project.pk, model=model, report=lambda d, t: self._bar(d, t, started)
        )
        reembed.drop_inactive_vectors(project_id=project.pk)
        self.stdout.write(f"\n{project.slug}: now on {model} ({result['embedded']} vectors, {result['seconds']} s)")

    def _via_celery(self, project: Project, model: str, timeout: float) -> None:
        reembed.set_progress(project.pk, status="queued", model=model, done=0, total=0)
        reembed_project_task.delay(project.pk, model)
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            state = reembed.get_progress(project.pk) or {}
            if state.get("status") == "indexing":
                self._indexing()
            else:
                self._bar(state.get("done", 0), state.get("total", 0), started)
            if state.get("status") == "done":
                self.stdout.write(f"\n{project.slug}: now on {model} ({state.get('seconds')} s in the worker)")
                return
            if state.get("status") == "queued" and time.monotonic() - started > 10:
                self.stderr.write("\rwaiting for a Celery worker (is `make run` up?)…", ending="")
            time.sleep(0.5)
        raise CommandError("timed out waiting for the re-embed job")

    def _indexing(self) -> None:
        """The vector index build's phase and progress, read from Postgres while the worker builds it."""
        for build in vector_index_builds():
            percent = f" {build.percent:.0f} %" if build.percent is not None else ""
            self.stdout.write(f"\rbuilding {build.name or 'the vector index'}: {build.phase}{percent}\033[K", ending="")
            self.stdout.flush()

    def _bar(self, done: int, total: int, started: float) -> None:
        self.stdout.write(render_bar(done, total, started), ending="")
        self.stdout.flush()
