"""python manage.py bench_embed: local embedder throughput, and a 10k re-embed through Celery."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from evaluation.synthetic import synthetic_sentences
from memories import services, tenancy
from memories.models import Memory, Project
from retrieval.embedding import reembed
from retrieval.embedding.local_embedder import LOCAL_MODEL_NAME, LocalEmbedder
from retrieval.tasks import reembed_project_task


class Command(BaseCommand):
    help = "Measure local embedding throughput and the time to re-embed N memories through Celery."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--texts", type=int, default=1000, help="texts per throughput run")
        parser.add_argument("--batch-sizes", default="16,32,64", help="float32 batch sizes to compare")
        parser.add_argument("--memories", type=int, default=10_000, help="memories to re-embed end to end")
        parser.add_argument("--no-worker", action="store_true", help="use an already running Celery worker")
        parser.add_argument("--skip-reembed", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        report: dict[str, Any] = {"cpus": os.cpu_count(), "throughput": self._throughput(options)}
        if not options["skip_reembed"]:
            report["reembed"] = self._reembed(options["memories"], spawn_worker=not options["no_worker"])
        self.stdout.write(json.dumps(report, indent=2))

    def _throughput(self, options: dict[str, Any]) -> list[dict[str, Any]]:
        started = time.perf_counter()
        LocalEmbedder().load()
        self.stdout.write(f"local model load: {time.perf_counter() - started:.2f} s")
        texts = synthetic_sentences(options["texts"], seed=1, tag=uuid.uuid4().hex[:6])
        batch_sizes = [int(s) for s in options["batch_sizes"].split(",")]
        rows = []
        # The default route (int8, each text alone over the worker threads), then the float32
        # products in padded batches of each size.
        for label, embedder in [
            ("int8, one text a run", LocalEmbedder()),
            *((f"float32, batch {size}", LocalEmbedder(int8=False, batch_size=size)) for size in batch_sizes),
        ]:
            embedder.load()
            started = time.perf_counter()
            for start in range(0, len(texts), 128):
                embedder.embed(texts[start : start + 128])
            seconds = time.perf_counter() - started
            rows.append({"route": label, "texts": len(texts), "texts_per_s": round(len(texts) / seconds, 1)})
            self.stdout.write(f"{label:>22}: {rows[-1]['texts_per_s']:>7} texts/s")
        return rows

    def _reembed(self, count: int, *, spawn_worker: bool) -> dict[str, Any]:
        project = _fresh_bench_project(count)
        worker = _start_worker() if spawn_worker else None
        try:
            started = time.monotonic()
            reembed.set_progress(project.pk, status="queued", done=0, total=count)
            reembed_project_task.delay(project.pk, LOCAL_MODEL_NAME)
            while (reembed.get_progress(project.pk) or {}).get("status") != "done":
                if time.monotonic() - started > 1800:
                    raise RuntimeError("re-embed did not finish in 30 minutes")
                time.sleep(0.2)
            seconds = time.monotonic() - started
        finally:
            if worker:
                worker.terminate()
                worker.wait(30)
        vectors = project.memories.filter(embeddings__model=LOCAL_MODEL_NAME).count()
        self.stdout.write(f"re-embed of {count} memories through Celery: {seconds:.1f} s ({count / seconds:.0f}/s)")
        return {"memories": count, "vectors": vectors, "seconds": round(seconds, 1), "per_s": round(count / seconds, 1)}


def _fresh_bench_project(count: int) -> Project:
    project = tenancy.project_get_or_create(slug="bench-embed")
    project.memories.all().delete()
    texts = synthetic_sentences(count, seed=2, tag=uuid.uuid4().hex[:6])
    # Seeding only: raw rows, no revisions or embedding jobs, so the job below does all the work.
    Memory.objects.bulk_create(
        [
            Memory(
                project=project,
                user_id=f"bench-{i % 10}",
                content=text,
                content_hash=services.content_hash(text),
                created_by="system:bench",
            )
            for i, text in enumerate(texts)
        ],
        batch_size=2000,
    )
    return project


def _start_worker() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "memoryhub", "worker", "--pool", "solo", "--loglevel", "WARNING"]
    )
