"""Word statistics for the full-text stage: which query words are too common to search.

Full text ORs the query's words, so one word that most of a user's memories contain makes
the stage check and rank most of their rows, for no ranking value (``ts_rank`` has no IDF:
a word in every memory scores every memory). The search statement skips query words found
in more than ``MEMORYHUB_KEYWORD_MAX_SHARE`` of the memories the caller can see; this
module keeps the counts it needs, per group of memories a search can see: one user's
``user``-scope memories, and the project's ``project``-scope ones (owner "").

Only groups with at least ``MEMORYHUB_KEYWORD_STATS_MIN_ROWS`` active memories get
statistics: below that, the stage is cheap anyway. Only words in at least ``STORE_SHARE``
of a group are stored, so a group costs a few hundred rows at most. Beat refreshes groups
whose size moved by more than ``REFRESH_DRIFT`` since their last count, or whose count is older
than ``MAX_AGE`` (checked every 10 minutes). Active, unexpired memories are counted, as the
search sees them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from retrieval.models import KeywordStats

STORE_SHARE = 0.01
REFRESH_DRIFT = 0.1
# Content can change without the count moving (edits, one memory replacing another).
MAX_AGE = timedelta(hours=24)

_GROUP_SIZES = """
SELECT project_id, CASE WHEN scope = 'project' THEN '' ELSE user_id END AS owner, count(*)
FROM memories_memory
WHERE status = 'active' AND (expires_at IS NULL OR expires_at > now())
  AND (%(project)s::bigint IS NULL OR project_id = %(project)s)
GROUP BY 1, 2
"""

# ts_stat runs the inner query itself, so the group's filter is built with format()'s %L
# quoting rather than bound parameters.
_COUNT_LEXEMES = """
INSERT INTO retrieval_commonlexeme (stats_id, lexeme, docs)
SELECT %(stats)s, word, ndoc
FROM ts_stat(format(
    'SELECT search FROM memories_memory WHERE project_id = %%s AND status = ''active'''
    ' AND (expires_at IS NULL OR expires_at > now()) AND %%s',
    %(project)s::bigint,
    CASE WHEN %(owner)s = '' THEN 'scope = ''project'''
         ELSE format('scope = ''user'' AND user_id = %%L', %(owner)s::text) END
))
WHERE ndoc >= %(min_docs)s
"""


@dataclass(frozen=True)
class RefreshResult:
    refreshed: int
    removed: int
    kept: int


def refresh_keyword_stats(*, project_id: int | None = None, force: bool = False) -> RefreshResult:
    """Recount the groups that are large enough and have drifted (all of them if ``force``)."""
    min_rows, now = int(settings.MEMORYHUB_KEYWORD_STATS_MIN_ROWS), timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(_GROUP_SIZES, {"project": project_id})
        sizes = {(project, owner): rows for project, owner, rows in cursor.fetchall()}
    existing = KeywordStats.objects.all() if project_id is None else KeywordStats.objects.filter(project_id=project_id)
    current = {(s.project_id, s.owner): s for s in existing}
    stale = [s.pk for key, s in current.items() if sizes.get(key, 0) < min_rows]
    removed = KeywordStats.objects.filter(pk__in=stale).delete()[1].get("retrieval.KeywordStats", 0)
    refreshed = kept = 0
    for (project, owner), rows in sorted(sizes.items()):
        if rows < min_rows:
            continue
        old = current.get((project, owner))
        fresh = old and abs(rows - old.rows) <= REFRESH_DRIFT * old.rows and old.refreshed_at > now - MAX_AGE
        if fresh and not force:
            kept += 1
            continue
        _recount(project, owner, rows)
        refreshed += 1
    return RefreshResult(refreshed=refreshed, removed=removed, kept=kept)


def _recount(project: int, owner: str, rows: int) -> None:
    with transaction.atomic():
        stats, _ = KeywordStats.objects.update_or_create(project_id=project, owner=owner, defaults={"rows": rows})
        stats.lexemes.all().delete()
        with connection.cursor() as cursor:
            cursor.execute(
                _COUNT_LEXEMES,
                {"stats": stats.pk, "project": project, "owner": owner, "min_docs": max(1, int(rows * STORE_SHARE))},
            )


def settle_after_bulk_load(project_id: int) -> None:
    """What autovacuum and beat do soon after a bulk load, done now (evaluation, benchmarks).

    Fresh planner statistics (with stale ones the planner expects one row per user and picks
    nested loops), the memories' words vacuumed (full text reads them by index-only scans, which
    visit the table for every row on a page not yet marked all-visible; inside a transaction, where
    no vacuum runs, only analysed: autovacuum comes soon) and the project's word counts.
    """
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memory")
        cursor.execute("ANALYZE memories_embedding")
        cursor.execute(
            "ANALYZE memories_memoryterm" if connection.in_atomic_block else "VACUUM (ANALYZE) memories_memoryterm"
        )
    refresh_keyword_stats(project_id=project_id, force=True)
