"""The pairs a run judges: each changed memory's nearest current memories of the same owner and
scope, by the cosine of their vectors under the project's active model.

The user's vectors are read as the retrieval engine reads a vector group
(``retrieval.vectors.resident_vectors``: one statement, unit-length float32), and kept by this process for
its next run of the same user, brought up to date from the group's recent ids (a worker that
consolidated a user reads only what changed since; ~4 ms at 10,000 vectors against ~250 ms for the
whole group). The products are numpy blocks: a full run of 10,000 memories is 10,000 x 10,000
cosines, an incremental run after 50 new memories 50 x 10,000.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from django.db import connection

from common.per_process import PerProcess
from memories.models import Project
from retrieval.vectors import resident_vectors
from retrieval.vectors.resident_vectors import Group

# Nearest memories judged per changed memory (a duplicate or a change of value is among a memory's
# few nearest; judging more costs time and finds nothing the rules would act on).
NEIGHBOURS = 10
# Rows of the changed memories multiplied at once: 1,024 x 10,000 float32 products are 40 MB.
BLOCK = 1024
# The most bytes of vectors held for later runs, all users together (least recently used out).
HELD_BYTES = 256 * 1024 * 1024
# A group larger than this is not read (about 330,000 vectors of 384 dimensions).
READ_BUDGET = 512 * 1024 * 1024


class _Held:
    def __init__(self) -> None:
        self.groups: OrderedDict[tuple[str, int, str, str], Group] = OrderedDict()

    def get(self, key: tuple[str, int, str, str]) -> Group | None:
        group = self.groups.get(key)
        if group is not None:
            self.groups.move_to_end(key)
        return group

    def put(self, key: tuple[str, int, str, str], group: Group) -> None:
        self.groups[key] = group
        self.groups.move_to_end(key)
        while len(self.groups) > 1 and sum(g.nbytes for g in self.groups.values()) > HELD_BYTES:
            self.groups.popitem(last=False)


_held = PerProcess(_Held)


def forget_held() -> None:
    """Drop the vectors this process holds (the throughput measure's cold run)."""
    _held.get().groups.clear()


def user_vectors(*, project: Project, model: str, user_id: str) -> Group:
    """The user's own vector group (every memory of theirs with a vector under ``model``, any status)."""
    key = (str(connection.settings_dict["NAME"]), project.pk, model, user_id)
    held = _held.get().get(key)
    with connection.cursor() as cursor:
        group = resident_vectors.read(cursor, held, project=project.pk, model=model, owner=user_id, budget=READ_BUDGET)
    if group.vectors is None:
        raise MemoryError(f"the vectors of {user_id!r} exceed {READ_BUDGET} bytes")
    _held.get().put(key, group)
    return group


@dataclass(frozen=True)
class Candidate:
    first: str
    second: str
    cosine: float

    @property
    def key(self) -> str:
        return pair_key(self.first, self.second)


def pair_key(first: str, second: str) -> str:
    """One name for a pair of memories, whichever order they come in."""
    return "|".join(sorted((first, second)))


def candidates(
    group: Group, *, current: Sequence[str], changed: Sequence[str], floor: float, neighbours: int = NEIGHBOURS
) -> list[Candidate]:
    """Each of ``changed`` with its ``neighbours`` nearest among ``current`` (ids of one scope) from
    cosine ``floor`` up, each pair once."""
    if group.vectors is None or not len(group.ids):
        return []
    rows = group.rows
    current_rows = np.fromiter((rows[i] for i in current if i in rows), dtype=np.int64)
    query_ids = [i for i in changed if i in rows]
    if not len(current_rows) or not query_ids:
        return []
    column_ids = [group.ids[row] for row in current_rows]
    columns = np.nan_to_num(group.vectors[current_rows])
    queries = np.nan_to_num(group.vectors[np.fromiter((rows[i] for i in query_ids), dtype=np.int64)])
    column_of = {memory_id: n for n, memory_id in enumerate(column_ids)}
    take = min(neighbours + 1, len(column_ids))
    found: dict[str, Candidate] = {}
    for start in range(0, len(query_ids), BLOCK):
        block_ids = query_ids[start : start + BLOCK]
        products = queries[start : start + BLOCK] @ columns.T
        for n, memory_id in enumerate(block_ids):
            own = column_of.get(memory_id)
            if own is not None:
                products[n, own] = -2.0
        if take < len(column_ids):
            nearest = np.argpartition(-products, take - 1, axis=1)[:, :take]
        else:
            nearest = np.broadcast_to(np.arange(len(column_ids)), (len(block_ids), len(column_ids)))
        for n, memory_id in enumerate(block_ids):
            for column in nearest[n]:
                cosine = float(products[n, column])
                if cosine < floor:
                    continue
                other = column_ids[column]
                candidate = Candidate(memory_id, other, cosine)
                found.setdefault(candidate.key, candidate)
    return list(found.values())
