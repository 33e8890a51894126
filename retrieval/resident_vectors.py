"""The vector groups a web process's searches read, kept in its memory, and the nearest rows picked
from them: the vector half's exact read without Postgres reading every vector on every search.

A group is a user's own vectors (any scope) or the project's shared ones (scope ``project``), under
one model, as in ``retrieval.search``. Postgres keeps a generation per group and the ids of the
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
reading the user's vectors (docs/adr/0026-resident-vectors.md). A group of CODES_MIN_ROWS or more
also keeps its vectors in int8 (``Codes``, a quarter of the bytes): an int8 product scores every
row within a known bound of its cosine, and only the rows that bound leaves in the running are
scored in float32 (``_candidates``; the pick in a request 1.6–1.75 -> 1.1–1.2 ms). At
its tenth pick a group's codes are laid out once for onnxruntime's int8 kernels, on the loader
thread (``Codes.pack``): the int8 product ~1.3 -> ~0.2 ms at 10,000 rows.

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


# A group of at least this many rows is picked in two passes (``Codes``); a smaller one by its
# float32 vectors alone, whose product costs less than the int8 pass's fixed cost.
CODES_MIN_ROWS = 4096
# Added to each row's bound on how far its int8 score may be from its float32 cosine: the float32
# product is itself rounded (384 terms: a few 1e-6 at most), and so is the arithmetic of the bound.
CODES_SLACK = 1e-4


# A group's codes are packed for onnxruntime (``Codes.pack``) at their this-many-th pick. Packing
# 10,000 rows costs ~20 ms of CPU (on the loader thread, holding the interpreter for under 1 ms at a
# time), what ten to twenty picks then save (~1-2 ms each): a copy that a write replaces after a few
# picks (a user in conversation, captured every turn) is never packed, a steady one soon is.
PACK_AFTER_PICKS = 10


@dataclass(frozen=True)
class Codes:
    """A group's vectors in int8, for the pick's first pass: each row ``v`` (unit length) as
    ``round(v / scale)`` with ``scale = max|v| / 127``, stored plus 128 (uint8), so a product with an
    int8 query reads a quarter of the float32 bytes (10,000 x 384: 3.8 MB against 15).

    ``l1`` is each row's ``sum |round(v / scale)| * scale``: with ``scale`` it bounds how far the int8
    score of a row can be from its float32 cosine (``pick``).

    ``packed`` is filled once (``pack``, on the loader thread) with an onnxruntime session that holds
    the codes as its constant operand, laid out once for its int8 kernels; until then every product
    lays out the codes anew (``products``)."""

    values: np.ndarray  # (rows, dim) uint8
    scale: np.ndarray  # (rows,) float32
    l1: np.ndarray  # (rows,) float32
    packed: _Packed = field(default_factory=lambda: _Packed(), compare=False, repr=False)

    @classmethod
    def of(cls, vectors: np.ndarray | None) -> Codes | None:
        """The codes of ``vectors`` (unit-length float32 rows); None for fewer than CODES_MIN_ROWS
        rows, or when a row has no direction (a zero vector's NaN: the float32 pass orders those)."""
        if vectors is None or len(vectors) < CODES_MIN_ROWS or not np.isfinite(vectors).all():
            return None
        return cls._quantised(vectors)

    @classmethod
    def _quantised(cls, vectors: np.ndarray) -> Codes:
        peak = np.abs(vectors).max(axis=1) if vectors.size else np.zeros(len(vectors), dtype=np.float32)
        scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
        signed = np.rint(vectors / scale[:, None]).astype(np.int8)
        l1 = (np.abs(signed.astype(np.int32)).sum(axis=1) * scale).astype(np.float32)
        return cls(signed.view(np.uint8) ^ np.uint8(0x80), scale, l1)

    @classmethod
    def carried(cls, held: Codes | None, source: np.ndarray, vectors: np.ndarray) -> Codes | None:
        """The codes of ``vectors``, whose row ``r`` is ``held``'s row ``source[r]`` unchanged
        (``source[r]`` < 0: a new or rewritten row): only those are quantised again (a group's
        refresh after a write; 10,000 rows quantised whole: ~13 ms)."""
        if held is None or len(vectors) < CODES_MIN_ROWS:
            return cls.of(vectors)
        fresh = source < 0
        if not np.isfinite(vectors[fresh]).all():
            return None
        new = cls._quantised(vectors[fresh])
        values = np.empty((len(vectors), vectors.shape[1]), dtype=np.uint8)
        scale, l1 = np.empty(len(vectors), dtype=np.float32), np.empty(len(vectors), dtype=np.float32)
        kept = ~fresh
        values[kept], scale[kept], l1[kept] = held.values[source[kept]], held.scale[source[kept]], held.l1[source[kept]]
        values[fresh], scale[fresh], l1[fresh] = new.values, new.scale, new.l1
        return cls(values, scale, l1)

    @property
    def nbytes(self) -> int:
        """The codes, and twice their size again for the packed session (its operand, transposed,
        and onnxruntime's own layout of it), counted before it is made."""
        return int(3 * self.values.nbytes + self.scale.nbytes + self.l1.nbytes)

    def products(self, queries: np.ndarray) -> np.ndarray:
        """The signed codes times ``queries`` (n, dim; int8) as int32, (rows, n): no pair of
        products saturates, whatever the CPU (``_int8_products``). Counts the pick (``PACK_AFTER_PICKS``)."""
        shifted = queries.view(np.uint8) ^ np.uint8(0x80)  # q + 128, as the codes are stored
        session = self.packed.session
        if session is None:
            self.packed.picks += 1  # not atomic: a count off by one or two under threads does no harm
            if self.packed.picks >= PACK_AFTER_PICKS and not self.packed.requested:
                self.packed.requested = True
                process_loader().pack(self)
            return _int8_products(self.values, np.ascontiguousarray(shifted.T))
        (products,) = session.run(None, {"queries": shifted})
        return np.asarray(products).T

    def pack(self) -> None:
        """Make the session ``products`` uses from now on (10,000 x 384: ~20 ms, a transposed copy
        and onnxruntime laying it out)."""
        if self.packed.session is not None:
            return
        operand = np.ascontiguousarray(self.values.T)  # (dim, rows)
        self.packed.operand = operand
        self.packed.session = _packed_session(operand)


@dataclass
class _Packed:
    """A ``Codes``'s onnxruntime session once packed, and what it needs kept."""

    picks: int = 0
    requested: bool = False
    session: Any = None
    # The transposed codes the session was given: onnxruntime does not own them, so they stay alive.
    operand: np.ndarray | None = None


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
    int8: Codes | None = None
    read_at: float = field(default_factory=time.monotonic)

    @classmethod
    def of(
        cls,
        generation: int,
        ids: list[str],
        vectors: np.ndarray | None,
        users: list[str] | None,
        rows: dict[str, int] | None = None,
        *,
        carried: tuple[Codes | None, np.ndarray] | None = None,
    ) -> Group:
        """The group; its int8 codes made from ``vectors``, or, with ``carried`` (an older copy's
        codes and the source of each row, ``Codes.carried``), from that copy's where rows are unchanged."""
        codes = user_codes = None
        if users is not None:
            codes = {user: code for code, user in enumerate(dict.fromkeys(users))}
            user_codes = np.fromiter((codes[user] for user in users), dtype=np.int32, count=len(users))
        if rows is None:
            rows = {memory_id: row for row, memory_id in enumerate(ids)}
        if vectors is None:
            int8 = None
        elif carried is None:
            int8 = Codes.of(vectors)
        else:
            int8 = Codes.carried(carried[0], carried[1], vectors)
        return cls(generation, ids, vectors, users, user_codes, codes, rows, int8)

    @property
    def nbytes(self) -> int:
        """The vectors and their int8 codes, and ~200 bytes a row for its id (an 85-byte str), list
        slot and index entry."""
        if self.vectors is None:
            return 0
        return int(self.vectors.nbytes) + (self.int8.nbytes if self.int8 is not None else 0) + 200 * len(self.ids)


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
    (10,000 vectors: ~230–330 ms, against ~10 ms for Postgres's read of them). Packs groups' codes
    for onnxruntime there too (``Codes.pack``)."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[tuple[str, int, str, str], int, str, str] | Codes] = queue.Queue()
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

    def pack(self, codes: Codes) -> None:
        """Pack ``codes`` (``Codes.pack``) off the request path."""
        with self._lock:
            self._start()
        self._queue.put(codes)

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="resident-vectors", daemon=True)
            self._thread.start()

    def wait(self) -> None:
        """Until every requested group is read and every requested packing done (tests, benchmarks)."""
        self._queue.join()

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            try:
                if isinstance(job, Codes):
                    self._pack(job)
                else:
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

    @staticmethod
    def _pack(codes: Codes) -> None:
        try:
            codes.pack()
        except Exception:
            log.exception("packing a group's int8 codes failed; its picks lay them out every time")


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
                source = np.concatenate([np.arange(len(held.ids)), np.full(len(new), -1)])
                for memory_id, row in held_rows.items():
                    vectors[row] = fresh[at[memory_id]]
                    source[row] = -1
                    if users_now is not None:
                        users_now[row] = users[at[memory_id]]
                if vectors.nbytes > budget:
                    return Group.of(int(generation), [], None, None)
                positions = dict(held.rows)
                positions.update((ids_now[row], row) for row in range(len(held.ids), len(ids_now)))
                return Group.of(int(generation), ids_now, vectors, users_now, positions, carried=(held.int8, source))
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
                    carried=(held.int8, np.concatenate([kept, np.full(len(vectors) - len(kept), -1)])),
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
        parts.append((_candidates(grp, queries, fetch, left_out), grp.ids))
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


def _candidates(
    grp: Group, queries: np.ndarray, fetch: int, left_out: np.ndarray | None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per query vector (unit length), rows of ``grp`` holding its ``fetch`` nearest and their exact
    cosine distances (inf for the rows ``left_out``).

    A group with int8 codes (``Codes``) is read in two passes. The int8 product scores every row,
    and each score is within a bound of the row's float32 cosine: ``|v.q - s(v).t(q)| <=
    |v - s(v)|.|q| + |s(v)|.|q - t(q)|``, the roundings at most half a step each (``scale * 0.5``
    and ``0.5 / query scale``) against the other side's L1 norm. Every row whose lowest possible
    distance is within the ``fetch``-th smallest highest possible one may be among the nearest;
    only those (~130 of 10,000 at ``fetch`` 60) are scored again in float32, the distances the
    search uses. The nearest rows are so exactly those of a float32 pass over all, which the
    bound's CODES_SLACK covers the rounding of. Otherwise one matrix-vector product per query
    vector over every row: on one BLAS thread, two such products beat one product with a
    two-column matrix (10,000 x 384: 1.25 against 1.64 ms).
    """
    codes = grp.int8
    if codes is None or len(grp.ids) <= fetch or not np.isfinite(queries).all():
        assert grp.vectors is not None
        everything = np.arange(len(grp.ids))
        columns = []
        for query in queries:
            distances = 1.0 - grp.vectors @ query
            if left_out is not None:
                distances[left_out] = np.inf
            columns.append((everything, distances))
        return columns
    query_scale = np.abs(queries).max(axis=1) / 127.0  # a unit vector has a component of at least 1/sqrt(dim)
    signed = np.rint(queries / query_scale[:, None]).astype(np.int8)  # (query vectors, dim)
    scores = codes.products(signed).astype(np.float64) * codes.scale[:, None] * query_scale
    bounds = (
        codes.scale[:, None] * (0.5 * np.abs(queries).sum(axis=1))
        + codes.l1[:, None] * (0.5 * query_scale)
        + CODES_SLACK
    )
    lowest, highest = 1.0 - scores - bounds, 1.0 - scores + bounds
    if left_out is not None:
        lowest[left_out] = highest[left_out] = np.inf
    assert grp.vectors is not None
    columns = []
    for column, query in enumerate(queries):
        limit = np.partition(highest[:, column], fetch - 1)[fetch - 1]
        rows = np.flatnonzero(lowest[:, column] <= limit)
        distances = 1.0 - grp.vectors[rows] @ query
        if left_out is not None:
            distances[left_out[rows]] = np.inf
        columns.append((rows, distances))
    return columns


def _new_products_session() -> Any:
    """The session of ``_int8_products`` (one per process: sessions are not shared with a fork's child)."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["codes", "queries", _ZERO_POINT, _ZERO_POINT], ["products"])],
        "int8_products",
        [
            helper.make_tensor_value_info("codes", TensorProto.UINT8, [None, None]),
            helper.make_tensor_value_info("queries", TensorProto.UINT8, [None, None]),
        ],
        [helper.make_tensor_value_info("products", TensorProto.INT32, [None, None])],
        initializer=[_zero_point()],
    )
    return _session(graph)


_products_session = PerProcess(_new_products_session)


def _int8_products(values: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """``values - 128`` (rows, dim; uint8) times ``queries - 128`` (dim, n; uint8) as int32, by
    onnxruntime's ``MatMulInteger`` on one thread (numpy has no int8 product). The codes are its left
    operand, which it reads as they are; the right one, the few query vectors, it lays out for its
    kernels on every call, and those kernels are made for many columns, not one or two (10,000 x
    384: ~1.3 ms against ~0.2 ms with the codes laid out once, ``_packed_session``).

    Both operands unsigned, each with its zero point of 128 (``_ZERO_POINT``): onnxruntime's uint8 x int8
    kernels for CPUs without VNNI (AVX2's ``vpmaddubsw``) add each pair of products into an int16 that
    saturates, off by up to 84,189 for a 10,000-row group on such a CPU, which would break the
    pick's bound; its uint8 x uint8 kernels widen both to int16 first, so no pair can saturate
    (``test_packed_codes_give_the_products_the_unpacked_ones_give``
    checks exactness on whatever CPU runs it)."""
    (products,) = _products_session.get().run(None, {"codes": values, "queries": queries})
    return np.asarray(products)


def _packed_session(operand: np.ndarray) -> Any:
    """An onnxruntime session computing ``queries - 128`` (n, dim; uint8) times ``operand - 128``
    (dim, rows; uint8), which it holds as a constant and lays out once for its int8 kernels (both
    unsigned: see ``_int8_products``). The operand is given as an external initializer: no copy of
    it is written into the model."""
    import onnxruntime
    from onnx import TensorProto, helper

    dim, rows = operand.shape
    constant = TensorProto(name="codes", data_type=TensorProto.UINT8, dims=[dim, rows])
    constant.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "codes"), ("offset", "0"), ("length", str(operand.nbytes))):
        constant.external_data.add(key=key, value=value)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["queries", "codes", _ZERO_POINT, _ZERO_POINT], ["products"])],
        "packed_int8_products",
        [helper.make_tensor_value_info("queries", TensorProto.UINT8, [None, dim])],
        [helper.make_tensor_value_info("products", TensorProto.INT32, [None, rows])],
        initializer=[constant, _zero_point()],
    )
    return _session(graph, external={"codes": onnxruntime.OrtValue.ortvalue_from_numpy(operand)})


# MatMulInteger's zero point, one scalar for both operands: a code or query value v is stored as v + 128.
_ZERO_POINT = "zero_point"


def _zero_point() -> Any:
    from onnx import TensorProto, helper

    return helper.make_tensor(_ZERO_POINT, TensorProto.UINT8, [], [128])


def _session(graph: Any, *, external: dict[str, Any] | None = None) -> Any:
    """A one-thread onnxruntime session running ``graph`` (with ``external`` initializers' values)."""
    import onnxruntime
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # what onnxruntime reads, whatever onnx would write
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if external:
        options.add_external_initializers(list(external), list(external.values()))
    return onnxruntime.InferenceSession(
        model.SerializeToString(), sess_options=options, providers=["CPUExecutionProvider"]
    )


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
