"""Per-model partial HNSW indexes on ``memories_embedding``: names, builds, progress.

One expression index per embedding model, built ``CONCURRENTLY`` outside request paths (by a task
the sweeper queues, :func:`queue_needed_indexes`, and by the re-embed job's last step), and only
once the model has a group the search walks: by the word statistics, more than
``retrieval.ranking.search.VECTOR_EXACT_MAX_ROWS`` memories of one user, or of one project's shared ones
(``reads_exactly``). A smaller group is read exactly (or from the web process's copy), never
through the graph, and every vector stored into a graph costs Postgres an insert into it: loading
the 5,882 LoCoMo turns, 227-246 memories/s with the index and 431 without it, the machine's CPU for
the load 47.8 -> 24.6 s (docs/adr/0027-hnsw-built-when-walked.md). Without its index, a search that walks
a group reads it exactly through the table: the same rows, slower, until the build (queued within a
minute of the statistics passing the size) is done.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass

from django.db import connection

from memories.models import Embedding, Project
from retrieval.embedding.local_embedder import LOCAL_MODEL_NAME
from retrieval.queueing import queue_vector_index
from retrieval.ranking import search
from retrieval.vectors.memory_vectors import active_model

log = logging.getLogger(__name__)


# HNSW build parameters (pgvector's defaults are m 16, ef_construction 64). bench_retrieve's
# recall check at 100k memories over 10 users: the filtered top 10 matched an exact search in
# 98.5 % of queries with the defaults and 100 % with ef_construction 128, at m 24 and at m 16;
# m 16 stores a vector ~25 % cheaper than m 24 (migration 0012).
HNSW_BUILD = "m = 16, ef_construction = 128"


def index_name(model: str, dimension: int) -> str:
    if (model, dimension) == (LOCAL_MODEL_NAME, 384):
        return "embedding_hnsw_local_minilm"  # created by migrations memories/0003 and 0005
    digest = hashlib.sha256(f"{model}:{dimension}".encode()).hexdigest()[:12]
    return f"embedding_hnsw_{digest}"


def index_sql(model: str, dimension: int, *, concurrently: bool) -> tuple[str, list[str]]:
    """The statement that builds ``model``'s index (and its parameters)."""
    how = "CONCURRENTLY " if concurrently else ""
    return (
        f"CREATE INDEX {how}IF NOT EXISTS {index_name(model, dimension)} ON memories_embedding "
        f"USING hnsw ((vector::vector({int(dimension)})) vector_cosine_ops) WITH ({HNSW_BUILD}) WHERE model = %s",
        [model],
    )


# Whether a search may walk one of a model's groups: as the search decides it (``reads_exactly``), by
# the word statistics' count of a group's memories (a user's own, a project's shared ones), in a
# project that has vectors of the model. The statistics table holds only groups of some size, so
# this reads a few rows, not the vectors.
_WALKED_GROUP_SQL = """
SELECT EXISTS (
    SELECT FROM retrieval_keywordstats ks
    WHERE ks.rows > %(rows)s
      AND EXISTS (SELECT FROM memories_embedding e WHERE e.model = %(model)s AND e.project_id = ks.project_id)
)
"""


def vector_index_needed(model: str) -> bool:
    """Whether a search may walk one of ``model``'s groups: the statistics count more than
    VECTOR_EXACT_MAX_ROWS memories in one, in a project with vectors of ``model``."""
    with connection.cursor() as cursor:
        cursor.execute(_WALKED_GROUP_SQL, {"model": model, "rows": search.VECTOR_EXACT_MAX_ROWS})
        row = cursor.fetchone()
    return bool(row and row[0])


def ensure_needed_index(model: str, dimension: int) -> bool:
    """``model``'s index built (``ensure_vector_index``) when a search may walk one of its groups, and
    only then; whether it is in place (a valid index is kept whatever the groups' sizes now)."""
    if vector_index_state(index_name(model, dimension)) is True:
        return True
    return vector_index_needed(model) and ensure_vector_index(model, dimension)


# pg_try_advisory_lock(namespace, hashtext(index name)): one build per index at a time.
INDEX_LOCK_NAMESPACE = 4602


@dataclass(frozen=True)
class IndexBuild:
    """A vector index being built now, as pg_stat_progress_create_index reports it."""

    name: str
    phase: str
    done: int
    total: int

    @property
    def percent(self) -> float | None:
        return round(100 * self.done / self.total, 1) if self.total else None


def vector_index_state(name: str) -> bool | None:
    """From the catalogue: True when the index is valid, False when a failed or running build left
    it invalid, None when it does not exist."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid WHERE c.relname = %s",
            [name],
        )
        row = cursor.fetchone()
    return None if row is None else bool(row[0])


def ensure_vector_index(model: str, dimension: int) -> bool:
    """Build the model's partial HNSW (cosine) index unless the catalogue has a valid one; whether it is in place.

    One expression index per model (``vector::vector(dim)``), so models of different dimensions
    coexist in one table during a switch. Built ``CONCURRENTLY``: inserts (inline embeds of API
    requests) go on while it builds. That cannot run inside a transaction; there nothing is
    built (the sweeper queues its build within a minute, once it is needed). A session-level
    advisory lock keeps one build per index; with it held, an invalid index is what a killed build
    left behind: dropped and built again. Progress: :func:`vector_index_builds`.
    """
    name = index_name(model, dimension)
    if vector_index_state(name) is True:
        return True
    if connection.in_atomic_block:
        log.info("vector index %s missing; left to the sweeper (inside a transaction)", name)
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", [INDEX_LOCK_NAMESPACE, name])
        (locked,) = cursor.fetchone() or (False,)
        if not locked:
            return False  # another process is building it
        try:
            state = vector_index_state(name)
            if state is False:
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            if state is not True:
                started = time.monotonic()
                log.info("building vector index %s for %s (%d dimensions)", name, model, dimension)
                cursor.execute(*index_sql(model, dimension, concurrently=True))
                log.info("built vector index %s in %.1f s", name, time.monotonic() - started)
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", [INDEX_LOCK_NAMESPACE, name])
    return True


def vector_index_builds() -> list[IndexBuild]:
    """Vector index builds running now, in any process, with their phase and progress."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(c.relname, ''), p.phase, "
            "CASE WHEN p.blocks_total > 0 THEN p.blocks_done ELSE p.tuples_done END, "
            "CASE WHEN p.blocks_total > 0 THEN p.blocks_total ELSE p.tuples_total END "
            "FROM pg_stat_progress_create_index p LEFT JOIN pg_class c ON c.oid = p.index_relid "
            "WHERE p.relid = 'memories_embedding'::regclass"
        )
        rows = cursor.fetchall()
    return [IndexBuild(name=name, phase=phase, done=int(done), total=int(total)) for name, phase, done, total in rows]


def queue_needed_indexes() -> list[tuple[str, int]]:
    """Queue a build of each project's active model's HNSW index that a search may walk and that is
    not in place (the sweeper calls this every minute); the (model, dimension) pairs queued.

    The build runs in a task of its own (``build_vector_index_task``), not in the sweeper: from
    about 150k vectors it would outlast the sweeper's 60 s limit (100k vectors: 38 s), which would
    cancel it half-built at every sweep. A second build queued while one runs finds its lock taken
    and ends at once (``ensure_vector_index``). Index DDL stays out of request paths: a request must
    not wait for a build.
    """
    queued: list[tuple[str, int]] = []
    models = {active_model(project) for project in Project.objects.only("active_embedding_model")}
    for model in sorted(models):
        dimension = Embedding.objects.filter(model=model).values_list("dimension", flat=True).first()
        if dimension and vector_index_state(index_name(model, dimension)) is not True and vector_index_needed(model):
            queue_vector_index(model, dimension)
            queued.append((model, dimension))
    return queued
