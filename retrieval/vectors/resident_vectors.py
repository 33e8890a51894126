"""The vector groups a web process's searches read, kept in its memory, and the nearest rows picked
from them: the vector half's exact read without Postgres reading every vector on every search.

A group is a user's own vectors (any scope) or the project's shared ones (scope ``project``), under
one model, as in ``retrieval.ranking.search``. Postgres keeps a generation per group and the ids of the
memories changed lately (``memories.models.VectorGroup``, written by triggers in the writing
transaction); the search's keyword statement reads the caller's two generations. A copy held at
another generation reads again the vectors of the recent ids (``refreshed``: ~4 ms at 10,000),
or, when they do not cover it, the whole group is read on a loader thread (``Loader``: ~200–300 ms
at 10,000) while Postgres answers the search. Each read takes the generation in the same snapshot
as the vectors, so a search never picks from vectors older than the ones its statements see,
whatever wrote them.

The pick is exact: float32 vectors scaled to unit length, ``fetch`` rows per query vector by cosine
distance, as the SQL read orders them. Postgres then applies the memory-level filters and fuses,
unchanged (the fusion statement takes the picked ids and distances as arrays). A 10,000-vector
group of 384 dimensions is 15 MB and its pick 0.6–2 ms of numpy against ~6–10 ms of Postgres
reading the user's vectors (docs/adr/0026-resident-vectors.md).

Held groups are bounded per process (``MEMORYHUB_RESIDENT_VECTORS_MB``, least recently used out
first); a group larger than that, or any group when it is 0, is read by Postgres as before.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection

from common.per_process import PerProcess
from memories.fields import vectors_from_binary

log = logging.getLogger(__name__)

# A group's rows (all of them, or those of the group's recent ids), with the group's generation and
# recent ids read in the same snapshot: the memory ids, for the shared group each row's user, and the
# vectors in pgvector's binary form back to back (``memories.fields.vectors_from_binary``). One
# aggregate node, one pass: every aggregate sees the rows in the same order. The owner filter is a
# separate text per group, so each uses its own index.
_GROUP_SQL = """
SELECT g.generation, g.recent_since, g.recent_ids::text[], count(e.memory_id),
       string_agg(e.memory_id::text, ','), {users}, string_agg(vector_send(e.vector), ''::bytea)
FROM (SELECT 1) one
LEFT JOIN memories_vectorgroup g ON g.project_id = %(project)s AND g.model = %(model)s AND g.owner = %(owner)s
LEFT JOIN memories_embedding e ON e.model = %(model)s AND e.project_id = %(project)s AND {owner_filter}{recent}
GROUP BY g.generation, g.recent_since, g.recent_ids
"""

SHARED = ""


@cache
def group_sql(*, shared: bool, recent: bool) -> str:
    """_GROUP_SQL for the shared group or a user's own, every row or only the ``recent`` ones."""
    return _GROUP_SQL.format(
        users="array_agg(e.user_id)" if shared else "NULL::text[]",
        owner_filter="e.scope = 'project'" if shared else "e.user_id = %(owner)s",
        recent=" AND e.memory_id = ANY(g.recent_ids)" if recent else "",
    )


@dataclass(frozen=True)
class Group:
    """One group's vectors at one generation (``vectors`` None: too large to hold)."""

    generation: int
    ids: list[str]
    vectors: np.ndarray | None
    # The shared group's users, a row's user as a code and each user's code: the caller's own
    # project-scope rows are left out there, their own group has them.
    users: list[str] | None = None
    user_codes: np.ndarray | None = None
    codes: dict[str, int] | None = None
    rows: dict[str, int] = field(default_factory=dict)
    read_at: float = field(default_factory=time.monotonic)

    @classmethod
    def of(
        cls,
        generation: int,
        ids: list[str],
        vectors: np.ndarray | None,
        users: list[str] | None,
        rows: dict[str, int] | None = None,
    ) -> Group:
        """The group, with each user's code (the shared group) and each memory's row."""
        codes = user_codes = None
        if users is not None:
            codes = {user: code for code, user in enumerate(dict.fromkeys(users))}
            user_codes = np.fromiter((codes[user] for user in users), dtype=np.int32, count=len(users))
        if rows is None:
            rows = {memory_id: row for row, memory_id in enumerate(ids)}
        return cls(generation, ids, vectors, users, user_codes, codes, rows)

    @property
    def nbytes(self) -> int:
        """The vectors, and ~200 bytes a row for its id (an 85-byte str), list slot and index entry."""
        if self.vectors is None:
            return 0
        return int(self.vectors.nbytes) + 200 * len(self.ids)


@dataclass(frozen=True)
class Picked:
    """The nearest rows per query vector (1-based ``ords``, as the fusion statement numbers them)."""

    ords: list[int]
    ids: list[str]
    distances: list[float]


class GroupCache:
    """Groups by (database, project, model, owner), least recently used first out, within a budget."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget = budget_bytes
        self._groups: OrderedDict[tuple[str, int, str, str], Group] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int, str, str]) -> Group | None:
        """The group held under ``key``, whatever its generation (now the most recently used)."""
        with self._lock:
            group = self._groups.get(key)
            if group is not None:
                self._groups.move_to_end(key)
            return group

    def put(self, key: tuple[str, int, str, str], group: Group) -> None:
        """Hold ``group`` under ``key``, unless a later generation is held already (a group's
        generations only grow: a slow read must not replace a newer copy)."""
        with self._lock:
            old = self._groups.pop(key, None)
            if old is not None and old.generation > group.generation:
                group = old
            self._held += group.nbytes - (old.nbytes if old is not None else 0)
            self._groups[key] = group
            while self._held > self.budget and len(self._groups) > 1:
                _, dropped = self._groups.popitem(last=False)
                self._held -= dropped.nbytes

    def held_bytes(self) -> int:
        with self._lock:
            return self._held


def _new_cache() -> GroupCache:
    return GroupCache(int(settings.MEMORYHUB_RESIDENT_VECTORS_MB) * 1024 * 1024)


_cache = PerProcess(_new_cache)
# A group too large to hold is not read again for this long, whatever its generation.
TOO_LARGE_RETRY_S = 60.0


def process_cache() -> GroupCache:
    """This process's groups (a new, empty cache after a fork)."""
    return _cache.get()


def process_loader() -> Loader:
    """This process's loader of whole groups (a new one after a fork: threads do not survive it)."""
    return _loader.get()


def enabled() -> bool:
    return int(settings.MEMORYHUB_RESIDENT_VECTORS_MB) > 0


def group(
    cursor: Any,
    *,
    project_id: int,
    model: str,
    owner: str,
    generation: int | None,
    dimension: int,
    rows: int | None = None,
) -> Group | None:
    """The group at ``generation`` (None: it never had a vector, so it is empty), from this process's
    cache, brought up to date by its recent ids; None when it cannot be used for this search (too
    large, another dimension, or being read whole by the loader: Postgres reads the vectors).
    ``rows``, the group's size as the word statistics count it, keeps a group too large for the
    budget from being read at all.

    Inside a transaction (the tests, a caller's ``atomic`` block) a whole read happens here: the
    loader's own connection would not see what the transaction wrote."""
    if generation is None:
        return Group.of(0, [], np.zeros((0, dimension), dtype=np.float32), None)
    cache = process_cache()
    if rows is not None and rows * dimension * 4 > cache.budget:
        return None
    key = (connection.settings_dict["NAME"], project_id, model, owner)
    held = cache.get(key)
    if held is None or held.generation != generation:
        if held is not None and held.vectors is None and time.monotonic() - held.read_at < TOO_LARGE_RETRY_S:
            return None
        fresh = None
        if held is not None:
            fresh = refreshed(cursor, held, project=project_id, model=model, owner=owner, budget=cache.budget)
        if fresh is None:
            if not connection.in_atomic_block:
                process_loader().request(key, project=project_id, model=model, owner=owner)
                return None
            fresh = read_whole(cursor, project=project_id, model=model, owner=owner, budget=cache.budget)
        cache.put(key, fresh)
        held = fresh
    if held.vectors is None or (held.ids and held.vectors.shape[1] != dimension):
        return None
    return held


class Loader:
    """Reads whole groups on a thread of its own, with its own connection: a search that finds no
    current copy of a group is answered by Postgres's read meanwhile, not held up for the read
    (10,000 vectors: ~230–330 ms, against ~10 ms for Postgres's read of them)."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[tuple[str, int, str, str], int, str, str]] = queue.Queue()
        self._pending: set[tuple[str, int, str, str]] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def request(self, key: tuple[str, int, str, str], *, project: int, model: str, owner: str) -> None:
        with self._lock:
            if key in self._pending:
                return
            self._pending.add(key)
            self._start()
        self._queue.put((key, project, model, owner))

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="resident-vectors", daemon=True)
            self._thread.start()

    def wait(self) -> None:
        """Until every requested group is read (tests, benchmarks)."""
        self._queue.join()

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            try:
                self._read(*job)
            finally:
                if self._queue.empty():
                    connection.close()
                self._queue.task_done()

    def _read(self, key: tuple[str, int, str, str], project: int, model: str, owner: str) -> None:
        try:
            cache = process_cache()
            with connection.cursor() as cursor:
                cache.put(key, read_whole(cursor, project=project, model=model, owner=owner, budget=cache.budget))
        except Exception:
            log.exception("reading vectors of %s failed; searches read them through Postgres", key[1:])
        finally:
            with self._lock:
                self._pending.discard(key)


_loader = PerProcess(Loader)


def read(cursor: Any, held: Group | None, *, project: int, model: str, owner: str, budget: int) -> Group:
    """The group now: ``held`` brought up to date by its recent ids when they cover it, else read whole."""
    fresh = None if held is None else refreshed(cursor, held, project=project, model=model, owner=owner, budget=budget)
    return fresh or read_whole(cursor, project=project, model=model, owner=owner, budget=budget)


def refreshed(cursor: Any, held: Group, *, project: int, model: str, owner: str, budget: int) -> Group | None:
    """``held`` with the vectors of the group's recent ids read again (a new memory, a re-embedded
    one; one no longer there dropped), when they cover every generation since ``held``'s; else None.
    Its ``vectors`` are None when they would not fit ``budget``."""
    where = {"project": project, "model": model, "owner": owner}
    if held.vectors is not None:
        cursor.execute(group_sql(shared=owner == SHARED, recent=True), where)
        generation, since, recent, rows, ids, users, blob = cursor.fetchone()
        if since is not None and held.generation >= since:
            fresh = _decoded(rows, blob)
            added = ids.split(",") if rows else []
            held_rows = {memory_id: held.rows[memory_id] for memory_id in recent if memory_id in held.rows}
            at = {memory_id: n for n, memory_id in enumerate(added)}
            if (
                fresh is not None
                and (not rows or fresh.shape[1] == held.vectors.shape[1])
                and all(memory_id in at for memory_id in held_rows)
            ):
                # New and rewritten rows only, the usual writes (a capture, a re-embedding): one copy
                # of the held vectors, new rows appended, rewritten ones replaced (10,000 held: ~4 ms).
                new = [n for n, memory_id in enumerate(added) if memory_id not in held.rows]
                vectors = np.concatenate([held.vectors, fresh[new]])
                ids_now = held.ids + [added[n] for n in new]
                users_now = None if held.users is None else held.users + [users[n] for n in new]
                for memory_id, row in held_rows.items():
                    vectors[row] = fresh[at[memory_id]]
                    if users_now is not None:
                        users_now[row] = users[at[memory_id]]
                if vectors.nbytes > budget:
                    return Group.of(int(generation), [], None, None)
                positions = dict(held.rows)
                positions.update((ids_now[row], row) for row in range(len(held.ids), len(ids_now)))
                return Group.of(int(generation), ids_now, vectors, users_now, positions)
            # Removed rows: the held ones kept, the read ones after them.
            if fresh is not None and (not rows or fresh.shape[1] == held.vectors.shape[1]):
                keep = np.ones(len(held.ids), dtype=bool)
                keep[[held.rows[i] for i in recent if i in held.rows]] = False
                kept = np.flatnonzero(keep)
                vectors = np.vstack([held.vectors[kept], fresh]) if rows else held.vectors[kept]
                if vectors.nbytes > budget:
                    return Group.of(int(generation), [], None, None)
                return Group.of(
                    int(generation),
                    [held.ids[row] for row in kept] + added,
                    vectors,
                    None if held.users is None else [held.users[row] for row in kept] + list(users or []),
                )
    return None


def read_whole(cursor: Any, *, project: int, model: str, owner: str, budget: int) -> Group:
    """The whole group (its ``vectors`` None when they would not fit ``budget``)."""
    shared = owner == SHARED
    cursor.execute(group_sql(shared=shared, recent=False), {"project": project, "model": model, "owner": owner})
    generation, _, _, rows, ids, users, blob = cursor.fetchone()
    generation = 0 if generation is None else int(generation)
    whole = _decoded(rows, blob, budget=budget)
    if whole is None:
        return Group.of(generation, [], None, None)
    return Group.of(generation, ids.split(",") if rows else [], whole, (users or []) if shared else None)


def _decoded(rows: int, blob: bytes | None, *, budget: int | None = None) -> np.ndarray | None:
    """``rows`` vectors from their binary forms, scaled to unit length (a vector of length zero has
    no direction: NaN, as pgvector's cosine gives it); None above ``budget`` bytes."""
    if not rows or blob is None:
        return np.zeros((0, 0), dtype=np.float32)
    blob = bytes(blob)
    if (budget is not None and len(blob) > budget) or len(blob) % rows:
        return None
    vectors = vectors_from_binary(blob, rows)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norms > 0, vectors / norms, np.nan).astype(np.float32)


def pick(own: Group, shared: Group, *, user_id: str, queries: np.ndarray, fetch: int) -> Picked:
    """Per query vector, the ``fetch`` nearest of the caller's own rows and the shared rows of
    other users, by exact cosine distance (NaN last), as the SQL read would return them."""
    queries = np.asarray(queries, dtype=np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    # Per group: per query vector, the rows that may be among the nearest and their distances.
    parts: list[tuple[list[tuple[np.ndarray, np.ndarray]], list[str]]] = []
    for grp, leave_out in ((own, None), (shared, user_id)):
        if not grp.ids or grp.vectors is None:
            continue
        left_out = None
        if leave_out is not None and grp.codes is not None and leave_out in grp.codes:
            left_out = np.asarray(grp.user_codes == grp.codes[leave_out], dtype=bool)
        parts.append((_candidates(grp, queries, left_out), grp.ids))
    ords: list[int] = []
    ids: list[str] = []
    kept: list[float] = []
    for column in range(queries.shape[0]):
        found: list[tuple[float, str]] = []
        for columns, group_ids in parts:
            rows, column_d = columns[column]
            top = _nearest(column_d, fetch)
            found.extend((float(column_d[i]), group_ids[rows[i]]) for i in top if column_d[i] != np.inf)
        found.sort(key=lambda item: (np.isnan(item[0]), item[0]))
        for distance, memory_id in found[:fetch]:
            ords.append(column + 1)
            ids.append(memory_id)
            kept.append(distance)
    return Picked(ords=ords, ids=ids, distances=kept)


def _candidates(grp: Group, queries: np.ndarray, left_out: np.ndarray | None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query vector (unit length), every row of ``grp`` and its exact cosine distance (inf for
    the rows ``left_out``): one matrix-vector product per query vector, which on one BLAS thread
    beats one product with a two-column matrix (10,000 x 384: 1.25 against 1.64 ms)."""
    assert grp.vectors is not None
    everything = np.arange(len(grp.ids))
    columns = []
    for query in queries:
        distances = 1.0 - grp.vectors @ query
        if left_out is not None:
            distances[left_out] = np.inf
        columns.append((everything, distances))
    return columns


def cosines(
    own: Group, shared: Group, *, ids: Sequence[str], queries: np.ndarray, query_vectors: int
) -> list[tuple[float | None, float | None]]:
    """Per id, its best cosine with the first ``query_vectors`` of ``queries`` and with the rest (the
    hypotheses; None when there are none), as the fusion statement's cosines would give them from
    Postgres: (None, None) for a memory with no vector in either group, NaN for a vector of length
    zero (unless another query vector gives a number; Postgres's ``min`` puts NaN last too)."""
    queries = np.asarray(queries, dtype=np.float32)
    with np.errstate(invalid="ignore", divide="ignore"):
        queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    similarities = np.full((len(ids), len(queries)), np.nan, dtype=np.float32)
    found = [False] * len(ids)
    for grp in (own, shared):  # the caller's own rows first: the shared group may hold them too
        if grp.vectors is None or not grp.rows:
            continue
        positions, rows = [], []
        for position, memory_id in enumerate(ids):
            row = grp.rows.get(memory_id)
            if row is not None and not found[position]:
                found[position] = True
                positions.append(position)
                rows.append(row)
        if rows:
            similarities[positions] = grp.vectors[rows] @ queries.T
    best = np.fmax.reduce(similarities[:, :query_vectors], axis=1).tolist()
    hyde = np.fmax.reduce(similarities[:, query_vectors:], axis=1).tolist() if len(queries) > query_vectors else None
    return [
        (best[n], None if hyde is None else hyde[n]) if present else (None, None) for n, present in enumerate(found)
    ]


def _nearest(distances: np.ndarray, fetch: int) -> np.ndarray:
    """Indexes of the ``fetch`` smallest distances (NaN after every number)."""
    if len(distances) <= fetch:
        return np.arange(len(distances))
    return np.argpartition(distances, fetch)[:fetch]
