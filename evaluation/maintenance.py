"""Maintenance figures of the end-to-end evaluation (``eval_pipeline --consolidate``,
docs/adr/0111-maintenance-figures.md): after capture and before the questions, every person's
memories are consolidated through the API as an operator would ask for it, and the report says
what that changed: duplicates per 100 memories before and after, and how often the stale value
of a ``change`` question ranks first, before and after.

A **duplicate** is an active memory with an older active memory of the same user and scope at
cosine ``rules.MERGE_MIN_COSINE`` (0.72, the least cosine consolidation merges at, ADR 0093) or
more, under the project's active embedding model; a fact said three times is two duplicates. It
is a cosine definition, not the rules' verdict: two close memories the rules rightly keep apart
("has a sister named Ana" / "... Lia") count, so "after" is not 0 by construction, and a change of
mind superseded leaves the count only when its two memories were that close.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any
from urllib.parse import quote

import numpy as np

from consolidation import rules, selectors, vectors
from memories.models import Memory, Project, Status
from retrieval.vectors.memory_vectors import active_model
from retrieval.vectors.resident_vectors import Group

Call = Callable[..., tuple[int, Any]]
DUPLICATE_MIN_COSINE = rules.MERGE_MIN_COSINE


def duplicates(project_ids: Iterable[int], *, threshold: float = DUPLICATE_MIN_COSINE) -> dict[str, Any]:
    """Active memories, duplicates among them (as defined above) and their rate per 100, over
    every end user of the projects."""
    memories = found = 0
    for project in Project.objects.filter(pk__in=list(project_ids)).order_by("pk"):
        model = active_model(project)
        users = Memory.objects.filter(project=project, status=Status.ACTIVE).values_list("user_id", flat=True)
        for user_id in sorted(set(users)):
            active, extra = user_duplicates(project=project, model=model, user_id=user_id, threshold=threshold)
            memories += active
            found += extra
    vectors.forget_held()  # the command's process is no worker: keep nothing for a next run
    return {
        "memories": memories,
        "duplicates": found,
        "per_100_memories": round(100 * found / memories, 2) if memories else None,
        "threshold": threshold,
    }


def user_duplicates(*, project: Project, model: str, user_id: str, threshold: float) -> tuple[int, int]:
    """``(active memories, duplicates)`` of one end user: within each scope, oldest first, a
    memory counts when an older one is at ``threshold`` or more."""
    current = selectors.active_ids(project=project, user_id=user_id)
    if not current:
        return 0, 0
    group = vectors.user_vectors(project=project, model=model, user_id=user_id)
    rows = Memory.objects.filter(pk__in=[memory_id for memory_id, _ in current]).values_list("pk", "created_at")
    created = {str(pk): at for pk, at in rows}
    by_scope: dict[str, list[str]] = {}
    for memory_id, scope in current:
        if memory_id in group.rows:
            by_scope.setdefault(scope, []).append(memory_id)
    found = 0
    for ids in by_scope.values():
        ids.sort(key=lambda memory_id: (created[memory_id], memory_id))
        found += count_later_duplicates(group, ids, threshold)
    return len(current), found


def count_later_duplicates(group: Group, ordered: Sequence[str], threshold: float) -> int:
    """How many of ``ordered`` (oldest first) have an earlier one at cosine ``threshold`` or more."""
    if len(ordered) < 2 or group.vectors is None:
        return 0
    block = np.nan_to_num(group.vectors[[group.rows[memory_id] for memory_id in ordered]])
    products = np.triu(block @ block.T, k=1)  # [i, j] for i older than j
    return int(np.count_nonzero((products >= threshold).any(axis=0)))


def consolidate_all(
    call: Call, keys: dict[str, str], users: Iterable[str], *, log: Callable[[str], None], timeout: float = 1800
) -> dict[str, Any]:
    """``POST /users/{id}/consolidate`` for every user, then wait for every run; their summed
    counts, how the runs ended, and the wall time."""
    started = time.monotonic()
    waiting: dict[str, str] = {}
    for user in users:
        status, answer = call("POST", f"/api/v1/users/{quote(user, safe='')}/consolidate", key=keys[user])
        if status != 202:
            raise RuntimeError(f"consolidate for {user} answered {status}: {answer}")
        waiting[user] = answer["job_id"]
    runs = len(waiting)
    counts: Counter[str] = Counter()
    ended: Counter[str] = Counter()
    last_log = time.monotonic()
    while waiting:
        time.sleep(0.2)
        for user, job_id in list(waiting.items()):
            path = f"/api/v1/consolidations/{job_id}?user_id={quote(user, safe='')}"
            status, run = call("GET", path, key=keys[user])
            if status != 200:
                raise RuntimeError(f"consolidation {job_id} answered {status}: {run}")
            if run["status"] in ("done", "failed"):
                ended[run["status"]] += 1
                counts.update({name: int(value) for name, value in run["counts"].items()})
                del waiting[user]
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"consolidations did not finish in {timeout} s ({runs - len(waiting)} of {runs})")
        if time.monotonic() - last_log > 15:
            log(f"  consolidations: {runs - len(waiting)} of {runs} done")
            last_log = time.monotonic()
    return {
        "runs": runs,
        "runs_by_status": dict(ended),
        "counts": dict(sorted(counts.items())),
        "wall_seconds": round(time.monotonic() - started, 1),
    }


def report(
    *, before: dict[str, Any], after: dict[str, Any], consolidation: dict[str, Any], stale_first: tuple[Any, Any]
) -> dict[str, Any]:
    """The ``maintenance`` section of the pipeline's report."""
    return {
        "duplicate_definition": "an active memory with an older active memory of the same user and scope"
        f" at cosine >= {before['threshold']}",
        "duplicates_before": before,
        "duplicates_after": after,
        "consolidation": consolidation,
        "stale_first_before": stale_first[0],
        "stale_first_after": stale_first[1],
    }


def lines(section: dict[str, Any]) -> list[str]:
    """The report's maintenance section as the command prints it."""
    before, after, runs = section["duplicates_before"], section["duplicates_after"], section["consolidation"]
    counts = ", ".join(f"{name} {value}" for name, value in runs["counts"].items())
    return [
        f"  consolidation: {runs['runs']} runs {runs['runs_by_status']} in {runs['wall_seconds']} s; {counts}",
        f"  duplicates per 100 memories: before {before['per_100_memories']} ({before['duplicates']} of"
        f" {before['memories']}), after {after['per_100_memories']} ({after['duplicates']} of {after['memories']});"
        f" cosine >= {before['threshold']}, same user and scope",
        f"  stale value ranked first (change questions): before {section['stale_first_before']},"
        f" after {section['stale_first_after']}",
    ]
