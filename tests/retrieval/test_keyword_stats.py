"""Full text skips query words that most of the caller's memories contain (keyword_stats.py)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from memories import lifecycle, services
from memories.models import Memory, Project
from retrieval.models import CommonLexeme, KeywordStats
from retrieval.ranking.keyword_stats import refresh_keyword_stats
from retrieval.ranking.search import SearchParams, hybrid_search
from retrieval.tasks import refresh_keyword_stats_task

TRAEFIK = "The Kubernetes ingress controller is Traefik, pinned to version 3."


@pytest.fixture
def corpus(project: Project, settings) -> Project:
    """alice: 30 memories, 25 of them about Kubernetes, one naming Traefik; mallory: 3."""
    settings.MEMORYHUB_KEYWORD_STATS_MIN_ROWS = 20
    drafts = [services.MemoryDraft(user_id="alice", content=TRAEFIK)]
    drafts += [
        services.MemoryDraft(user_id="alice", content=f"Kubernetes note {n}: cluster {n} runs release {n * 7}.")
        for n in range(24)
    ]
    drafts += [
        services.MemoryDraft(user_id="alice", content=f"Helm chart {n} pins its image digest.") for n in range(5)
    ]
    drafts += [services.MemoryDraft(user_id="mallory", content=f"Kubernetes memo {n} for mallory.") for n in range(3)]
    services.memory_bulk_create(project=project, drafts=drafts, actor="test")
    return project


def keyword_hits(
    project: Project, user_id: str, query: str, *, max_share: float, row_budget: int | None = None
) -> tuple[list[str], list[str]]:
    params = SearchParams(
        project_id=project.pk,
        user_id=user_id,
        query=query,
        model="none",
        vectors=None,
        max_keyword_share=max_share,
        keyword_row_budget=row_budget,
    )
    result = hybrid_search(params)
    ids = [c.memory_id for c in result.candidates]
    contents = {str(pk): text for pk, text in Memory.objects.filter(pk__in=ids).values_list("pk", "content")}
    return [contents[memory_id] for memory_id in ids], result.skipped_words


def test_refresh_counts_common_words_of_large_groups_only(corpus):
    result = refresh_keyword_stats(project_id=corpus.pk)
    assert (result.refreshed, result.removed, result.kept) == (1, 0, 0)
    stats = KeywordStats.objects.get(project=corpus)
    assert (stats.owner, stats.rows) == ("alice", 30)  # mallory's 3 memories are below the minimum
    docs = dict(CommonLexeme.objects.filter(stats=stats).values_list("lexeme", "docs"))
    assert docs["kubernet"] == 25
    assert docs["helm"] == 5
    assert docs["traefik"] == 1


def test_refresh_recounts_on_drift_and_drops_groups_that_shrank(corpus, settings):
    refresh_keyword_stats(project_id=corpus.pk)
    services.memory_bulk_create(
        project=corpus, drafts=[services.MemoryDraft(user_id="alice", content="Kubernetes again.")], actor="test"
    )
    assert refresh_keyword_stats(project_id=corpus.pk).kept == 1  # 31 vs 30: within the drift allowance
    assert KeywordStats.objects.get(project=corpus).rows == 30
    # A count older than a day is redone even when the size held.
    KeywordStats.objects.filter(project=corpus).update(refreshed_at=timezone.now() - timedelta(hours=25))
    assert refresh_keyword_stats(project_id=corpus.pk).refreshed == 1
    assert KeywordStats.objects.get(project=corpus).rows == 31
    for memory in Memory.objects.filter(project=corpus, user_id="alice")[:15]:
        lifecycle.memory_archive(memory=memory, actor="test")
    assert refresh_keyword_stats(project_id=corpus.pk).removed == 1
    assert not KeywordStats.objects.filter(project=corpus).exists()
    assert not CommonLexeme.objects.exists()


def test_full_text_skips_a_word_most_memories_contain_and_keeps_the_rare_one(corpus):
    refresh_keyword_stats(project_id=corpus.pk)
    hits, skipped = keyword_hits(corpus, "alice", "kubernetes traefik", max_share=0.5)
    assert hits == [TRAEFIK]
    assert skipped == ["kubernet"]
    # Without the cut every Kubernetes memory is a full-text candidate.
    hits, skipped = keyword_hits(corpus, "alice", "kubernetes traefik", max_share=1.0)
    assert len(hits) == 25 and hits[0] == TRAEFIK
    assert skipped == []


def test_the_row_budget_keeps_the_rarest_words_that_fit(corpus):
    refresh_keyword_stats(project_id=corpus.pk)
    # traefik (1 memory) fits a budget of 6, helm (5 more) too, kubernetes (25 more) does not.
    hits, skipped = keyword_hits(corpus, "alice", "kubernetes helm traefik", max_share=1.0, row_budget=6)
    assert skipped == ["kubernet"]
    assert len(hits) == 6 and TRAEFIK in hits
    hits, skipped = keyword_hits(corpus, "alice", "kubernetes helm traefik", max_share=1.0, row_budget=5)
    assert (hits, skipped) == ([TRAEFIK], ["helm", "kubernet"])
    # The rarest word is searched even when it alone is over the budget.
    hits, skipped = keyword_hits(corpus, "alice", "kubernetes helm", max_share=1.0, row_budget=1)
    assert len(hits) == 5 and skipped == ["kubernet"]


def test_without_statistics_nothing_is_skipped(corpus):
    hits, skipped = keyword_hits(corpus, "alice", "kubernetes traefik", max_share=0.5)
    assert len(hits) == 25 and skipped == []


def test_one_users_statistics_do_not_change_another_users_search(corpus):
    refresh_keyword_stats(project_id=corpus.pk)
    hits, skipped = keyword_hits(corpus, "mallory", "kubernetes", max_share=0.5)
    assert len(hits) == 3 and skipped == []
    assert all("mallory" in hit for hit in hits)


def test_the_beat_task_refreshes_every_project(corpus, other_project):
    services.memory_bulk_create(
        project=other_project,
        drafts=[services.MemoryDraft(user_id="bob", content=f"Bob memo {n}.") for n in range(20)],
        actor="test",
    )
    assert refresh_keyword_stats_task() == {"refreshed": 2, "removed": 0, "kept": 0}
    assert set(KeywordStats.objects.values_list("owner", flat=True)) == {"alice", "bob"}


def test_keyword_coverage_weighs_rare_words_above_common_ones(corpus):
    def coverage_of_a_kubernetes_only_memory() -> float:
        params = SearchParams(
            project_id=corpus.pk, user_id="alice", query="kubernetes traefik", model="none", vectors=None
        )
        candidates = hybrid_search(params).candidates
        contents = dict(Memory.objects.filter(project=corpus).values_list("pk", "content"))
        coverage = {contents[uuid.UUID(c.memory_id)]: c.keyword_coverage for c in candidates}
        assert coverage[TRAEFIK] == pytest.approx(1.0)
        return float(coverage["Kubernetes note 0: cluster 0 runs release 0."] or 0.0)

    # Without statistics each query word counts the same: one of two words.
    assert coverage_of_a_kubernetes_only_memory() == pytest.approx(0.5)
    # With them, "kubernetes" (in 25 of 30 memories) weighs far less than "traefik" (in 1).
    refresh_keyword_stats(project_id=corpus.pk)
    assert coverage_of_a_kubernetes_only_memory() < 0.3
