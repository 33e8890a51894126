"""python manage.py bench_transfer --memories 100000: export and import rates on a generated project.

Builds a source project of N memories (one in ten superseded once, one in twenty linked to its
neighbour, a create revision each), exports it to a file, imports it into a new empty project and
exports that again, and prints the seconds and rows per second of each step and whether the two
exports are equal. The generated rows are written directly (no embedding), the import queues its
memories for embedding as any import does.
"""

from __future__ import annotations

import json
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import connection

from evaluation.synthetic import synthetic_sentences
from integrations.transfer import export_lines, import_lines
from memories import history, services, tenancy
from memories.models import Memory, MemoryEdge, MemoryRevision, Status


class Command(BaseCommand):
    help = "Measure export and import rates on a generated project."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--memories", type=int, default=100_000)

    def handle(self, *args: Any, **options: Any) -> None:
        count = options["memories"]
        tag = uuid.uuid4().hex[:8]
        source = tenancy.project_get_or_create(slug=f"bench-transfer-{tag}", team_slug="bench-transfer")
        target = tenancy.project_get_or_create(slug=f"bench-transfer-{tag}-copy", team_slug="bench-transfer")
        started = time.perf_counter()
        self._generate(source, count)
        generated = time.perf_counter() - started
        with tempfile.NamedTemporaryFile("w+", suffix=".jsonl", encoding="utf-8") as handle:
            started = time.perf_counter()
            lines = 0
            for line in export_lines(project=source):
                handle.write(line + "\n")
                lines += 1
            exported = time.perf_counter() - started
            handle.flush()
            size = handle.tell()
            handle.seek(0)
            started = time.perf_counter()
            result = import_lines(project=target, lines=handle)
            imported = time.perf_counter() - started
            handle.seek(0)
            original = handle.read().splitlines()
        started = time.perf_counter()
        again = list(export_lines(project=target))
        reexported = time.perf_counter() - started
        started = time.perf_counter()
        rerun = import_lines(project=target, lines=original)
        reimported = time.perf_counter() - started
        self.stdout.write(
            json.dumps(
                {
                    "memories": count,
                    "lines": lines,
                    "file_bytes": size,
                    "generate_s": round(generated, 1),
                    "export_s": round(exported, 1),
                    "export_memories_per_s": round(count / exported),
                    "import_s": round(imported, 1),
                    "import_memories_per_s": round(count / imported),
                    "imported": result.as_dict()["imported"],
                    "rejected": len(result.rejected),
                    "reexport_s": round(reexported, 1),
                    "round_trip_equal": again == original,
                    "rerun_import_s": round(reimported, 1),
                    "rerun_skipped": rerun.skipped,
                    "rerun_imported_memories": rerun.memories,
                }
            )
        )
        for project in (target, source):
            with connection.cursor() as cursor:
                cursor.execute("UPDATE memories_memory SET supersedes_id = NULL WHERE project_id = %s", [project.pk])
            project.delete()

    def _generate(self, project: Any, count: int) -> None:
        texts = synthetic_sentences(count, seed=13, tag="transfer")
        start = datetime(2026, 1, 1, tzinfo=UTC)
        for offset in range(0, count, 5000):
            batch = []
            for index in range(offset, min(count, offset + 5000)):
                superseded = index % 10 == 1
                batch.append(
                    Memory(
                        project=project,
                        user_id=f"user-{index % 50}",
                        content=texts[index],
                        content_hash=services.content_hash(texts[index]),
                        status=Status.SUPERSEDED if superseded else Status.ACTIVE,
                        version=1,
                        created_by="system:bench",
                        embedding_status="ready",
                    )
                )
            rows = Memory.objects.bulk_create(batch)
            MemoryRevision.objects.bulk_create(
                [
                    MemoryRevision(memory=m, action="create", after=history.snapshot(m), actor="system:bench")
                    for m in rows
                ]
            )
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE memories_memory m SET created_at = v.c, updated_at = v.c "
                    "FROM unnest(%s::uuid[], %s::timestamptz[]) AS v(id, c) WHERE m.id = v.id",
                    [[m.pk for m in rows], [start + timedelta(seconds=offset + i) for i in range(len(rows))]],
                )
            # Chains: the memory after each superseded one is its successor (version 2).
            pairs = [(rows[i + 1].pk, rows[i].pk) for i in range(len(rows) - 1) if (offset + i) % 10 == 1]
            with connection.cursor() as cursor:
                cursor.execute(
                    "UPDATE memories_memory m SET supersedes_id = v.p, version = 2 "
                    "FROM unnest(%s::uuid[], %s::uuid[]) AS v(id, p) WHERE m.id = v.id",
                    [[a for a, _ in pairs], [b for _, b in pairs]],
                )
            MemoryEdge.objects.bulk_create(
                [
                    MemoryEdge(project=project, from_memory=rows[i], to_memory=rows[i + 1], created_by="system:bench")
                    for i in range(0, len(rows) - 1, 20)
                ]
            )
