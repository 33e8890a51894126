"""The retrieval pipeline behind POST /api/v1/retrieve, one small stage per function.

window → HyDE → one batched embedding → hybrid search (one SQL statement) →
calibrated relevance + min_score cut → graph hops → supersede chains → token-budget
packing. Every stage that errors or runs out of time is skipped and named in
``degraded``; the request itself never fails.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from common.errors import RateLimited
from memories.models import Memory, Project, Status
from memories.selectors import older_versions
from retrieval import cache
from retrieval.answer import build_result
from retrieval.embedding.protocol import EmbedderError
from retrieval.embedding.vector_cache import cache_key, cache_name
from retrieval.llm import llm_configured
from retrieval.models import RetrievalLog
from retrieval.queries import conversation_text, embed_queries, query_embedder, query_texts, run_hyde, wants_hyde
from retrieval.ranking import answer_type, episodes, judge, relevance
from retrieval.ranking.graph import expand_graph, load_memories, searchable
from retrieval.ranking.search import Candidate, SearchParams, hybrid_search
from retrieval.shapes import Hit, RetrieveRequest, RetrieveResult, Trace
from retrieval.vectors.memory_vectors import active_model

log = logging.getLogger(__name__)

SEARCH_MIN_MS = 200


def default_min_score(project_min_score: float | None = None) -> float:
    """The cut when a request names none: the project's own, else MEMORYHUB_MIN_SCORE, else the fitted one."""
    if project_min_score is not None:
        return float(project_min_score)
    value = getattr(settings, "MEMORYHUB_MIN_SCORE", None)
    return relevance.FITTED.min_score if value is None else float(value)


def default_margin() -> float:
    value = getattr(settings, "MEMORYHUB_RELEVANCE_MARGIN", None)
    return relevance.FITTED.margin if value is None else float(value)


def retrieve(*, project: Project, request: RetrieveRequest, trace: Trace | None = None) -> RetrieveResult:
    """Run the pipeline for one turn (or answer it from the per-turn cache)."""
    trace = trace or Trace()
    started = time.perf_counter()
    key = cache.turn_key(project.pk, request.user_id, request.turn_id) if request.turn_id else None
    conversation = conversation_text(request)
    opening = _open(project, request, key, conversation)
    if opening.entry is not None:
        if hit := _from_cache(project, request, opening.entry):
            return _finish(project, request, trace, hit, started)
        # The entry named a row that is gone: the turn runs again, counted as any other.
        opening = _open(project, request, None, conversation)
    if opening.wait:
        raise RateLimited(
            f"more than {project.retrieval_rate_limit} retrievals a minute for this user; retry in {opening.wait} s",
            details={"retry_after": opening.wait},
        )
    try:
        result = _run(project, request, trace, started, conversation=conversation, looked_up=opening.vectors)
    except DatabaseError:
        log.exception("retrieval database stage failed")
        connection.close_if_unusable_or_obsolete()
        trace.degraded.append("database")
        result = RetrieveResult()
    if key and "database" not in trace.degraded:
        # Before the answer: the same turn_id asked again at once must find it (docs/api.md: no
        # new LLM or embedding call).
        cache.put(key, result.cache_entry())
    return _finish(project, request, trace, result, started)


def _open(
    project: Project, request: RetrieveRequest, key: str | None, conversation: tuple[str, str, str]
) -> cache.Opening:
    """What Redis holds for this retrieve (``cache.open_turn``): the turn's cached answer, else the
    rate limit counted and the query texts' cached vectors."""
    keys: list[str] = []
    if conversation[0].strip():
        try:
            name = cache_name(query_embedder(active_model(project), project.pk))  # as embed_texts names it
            keys = [cache_key(name, text) for text in query_texts(*conversation[:2])]
        except EmbedderError:
            pass  # embed_queries names the embedder unavailable
    return cache.open_turn(
        turn_key=key,
        project_id=project.pk,
        user_id=request.user_id,
        limit=project.retrieval_rate_limit if request.rate_limited else 0,
        vector_keys=keys,
    )


def _from_cache(project: Project, request: RetrieveRequest, entry: dict[str, Any]) -> RetrieveResult | None:
    """The cached answer with its rows loaded fresh; None (run again) when one of them is gone
    (deleted, archived, superseded since) or the entry is not in this version's shape."""
    try:
        hits = [(str(h["id"]), float(h["score"]), tuple(h["matched_by"])) for h in entry["hits"]]
        said = [(str(e["id"]), float(e["score"]), tuple(e["matched_by"])) for e in entry["episodes"]]
        injection, tokens, truncated = str(entry["injection"]), int(entry["token_count"]), bool(entry["truncated"])
        profile = entry["profile"]
    except (KeyError, TypeError, ValueError):
        return None
    found_episodes = episodes.load(project=project, user_id=request.user_id, ids=[i for i, _, _ in said])
    if len(found_episodes) != len(said):
        return None
    for episode, (_, value, matched_by) in zip(found_episodes, said, strict=True):
        episode.score, episode.matched_by = value, matched_by
    memories = load_memories(project, request.user_id, [memory_id for memory_id, _, _ in hits])
    now, statuses = timezone.now(), statuses_searched(request)
    if sum(searchable(m, request, now=now, statuses=statuses) for m in memories.values()) != len(hits):
        return None
    chains = older_versions(project=project, memories=list(memories.values()), user_id=request.user_id)
    found = [
        Hit(memories[memory_id], score, matched_by, tuple(chains.get(memory_id, ())))
        for memory_id, score, matched_by in hits
    ]
    return RetrieveResult(
        memories=found,
        episodes=found_episodes,
        injection=injection,
        token_count=tokens,
        truncated=truncated,
        cached=True,
        profile=profile,
    )


def _run(
    project: Project,
    request: RetrieveRequest,
    trace: Trace,
    started: float,
    *,
    conversation: tuple[str, str, str],
    looked_up: Sequence[bytes | None] = (),
) -> RetrieveResult:
    query, context, window = conversation
    trace.query = query
    if not query.strip():
        return RetrieveResult()
    budget_s = float(getattr(settings, "MEMORYHUB_RETRIEVE_BUDGET_S", 2.0))
    if wants_hyde(project, request):
        trace.hypotheses = run_hyde(window or query, trace=trace, deadline=started + budget_s)
    model = active_model(project)
    queries = query_texts(query, context)
    # The search sends its full-text statement, then asks for the query vectors: they are embedded
    # on this thread while Postgres runs that statement (no second thread to wake).
    # Computed once: the search asks for the vectors, then the scoring.
    embedding = functools.cache(
        lambda: embed_queries(
            [*queries, *trace.hypotheses], model=model, project_id=project.pk, trace=trace, looked_up=looked_up
        )
    )
    candidates = search(
        project,
        request,
        query=query,
        model=model,
        vectors=embedding,
        query_vectors=len(queries),
        deadline=started + budget_s,
        trace=trace,
    )
    vectors = embedding()
    scored = score(
        candidates,
        request=request,
        vectors=vectors,
        query_vectors=len(queries),
        model=model,
        trace=trace,
        project_min_score=project.min_score,
    )
    if _wants_judge(request):
        scored = judge.run(
            query=window or query,
            project=project,
            scores=trace.scores,
            fallback=scored,
            trace=trace,
            deadline=started + budget_s,
        )
    said = find_episodes(
        project, request, query=query, model=model, vectors=vectors, query_vectors=len(queries), trace=trace
    )
    if said:
        # Memories keep their cut; episodes have their own (a request's min_score is both), and
        # the two lists are ranked as one. That cut was chosen on scores with vector evidence:
        # without query vectors every full-text hit among the user's messages is kept (a message
        # sharing its words with few others has a low keyword share, ``episodes._statement``).
        default = float(settings.MEMORYHUB_EPISODE_MIN_SCORE) if vectors is not None else 0.0
        floor = request.min_score if request.min_score is not None else default
        said = [e for e in said if e.score >= floor]
        scored = sorted([*scored, *((e.key, e.score) for e in said)], key=lambda pair: (-pair[1], pair[0]))
    # Only the ones that will be returned: loading every candidate above the cut (60 and
    # more on a large corpus) with its relations cost ~10 ms per call.
    top = scored[: request.limit]
    by_key = {e.key: e for e in said}
    memories = load_memories(project, request.user_id, [i for i, _ in top if i not in by_key])
    ranked = [(memories[mid], s) for mid, s in top if mid in memories]
    kept = [by_key[i] for i, _ in top if i in by_key]
    episodes.date(kept)
    ranked, kept = answering(query, request, ranked, kept, trace=trace)
    ranked = expand_graph(project, request, ranked, trace=trace)[: request.limit]
    ranked, kept = episodes.without_sources(ranked, kept)
    chains = older_versions(project=project, memories=[m for m, _ in ranked], user_id=request.user_id)
    return build_result(ranked, chains, request=request, project=project, trace=trace, said=kept)


def answering(
    query: str,
    request: RetrieveRequest,
    ranked: list[tuple[Memory, float]],
    said: list[episodes.Episode],
    *,
    trace: Trace,
) -> tuple[list[tuple[Memory, float]], list[episodes.Episode]]:
    """Only the items that can hold the kind of answer the query asks for (``answer_type``).

    Part of the relevance cut: a request's own ``min_score`` (the ranking alone) skips it, and
    so does a judge that ran, which read the items themselves.
    """
    expectation = answer_type.expected(query)
    if not expectation or request.min_score is not None or trace.judged is not None:
        return ranked, said
    kept = [(m, s) for m, s in ranked if answer_type.holds(expectation, m.content, message=False)]
    kept_said = [e for e in said if answer_type.holds(expectation, e.content, message=True)]
    kept_ids = {str(m.pk) for m, _ in kept} | {e.key for e in kept_said}
    trace.unanswering = [str(m.pk) for m, _ in ranked if str(m.pk) not in kept_ids]
    trace.unanswering += [e.key for e in said if e.key not in kept_ids]
    return kept, kept_said


def find_episodes(
    project: Project,
    request: RetrieveRequest,
    *,
    query: str,
    model: str,
    vectors: np.ndarray | None,
    query_vectors: int,
    trace: Trace,
) -> list[episodes.Episode]:
    """The user's messages that match the query, scored by the memories' relevance model.

    A request that filters by kind or category asks for memories of that kind: no episodes.
    """
    if not request.episodes or request.kinds or request.categories:
        return []
    started = time.perf_counter()
    try:
        found = episodes.find(
            project=project,
            user_id=request.user_id,
            query=query,
            model=model,
            vectors=vectors,
            query_vectors=query_vectors,
        )
    except DatabaseError:
        log.exception("episode search failed")
        connection.close_if_unusable_or_obsolete()
        trace.degraded.append("episodes_unavailable")
        return []
    # Without query vectors the background is None: the keyword model scores them, as it does memories.
    episodes.score(found, stats=trace.background if vectors is not None else None, query_vectors=query_vectors)
    trace.timed("episodes", started)
    return found


def search(
    project: Project,
    request: RetrieveRequest,
    *,
    query: str,
    model: str,
    vectors: Callable[[], np.ndarray | None],
    query_vectors: int,
    deadline: float,
    trace: Trace,
) -> list[Candidate]:
    """The hybrid search, limited to what is left of the request's time budget; ``vectors``
    gives the query vectors when the full-text half is done (None: full text only)."""
    started = time.perf_counter()
    statuses = statuses_searched(request)
    params = SearchParams(
        project_id=project.pk,
        user_id=request.user_id,
        query=query,
        model=model,
        vectors=None,
        query_vectors=query_vectors,
        statuses=statuses,
        kinds=request.kinds,
        categories=request.categories,
        depth=max(50, request.limit * 3),
        max_keyword_share=float(settings.MEMORYHUB_KEYWORD_MAX_SHARE),
        keyword_row_budget=int(settings.MEMORYHUB_KEYWORD_ROW_BUDGET) or None,
    )
    # At least SEARCH_MIN_MS: a search that starts must have a chance to finish.
    timeout_ms = max(SEARCH_MIN_MS, int((deadline - started) * 1000))
    result = hybrid_search(params, timeout_ms=timeout_ms, pending_vectors=vectors)
    trace.candidates, trace.skipped_words = result.candidates, result.skipped_words
    trace.timed("search", started)
    return trace.candidates


def score(
    candidates: Sequence[Candidate],
    *,
    request: RetrieveRequest,
    vectors: np.ndarray | None,
    query_vectors: int,
    model: str,
    trace: Trace,
    project_min_score: float | None = None,
) -> list[tuple[str, float]]:
    """Relevance per candidate, cut at min_score and the relative margin, best first.

    A request's own ``min_score`` replaces both cuts (``min_score: 0`` returns the ranking);
    else the project's ``min_score`` (when set) replaces the default absolute cut.
    Without query vectors (embedder down) the full-text hits are scored and cut by the same
    model fitted without its vector features (``relevance.KEYWORD_ONLY``).
    """
    explicit = request.min_score is not None
    if vectors is None:
        threshold = request.min_score if explicit else relevance.KEYWORD_ONLY.min_score
        margin = 0.0 if explicit else relevance.KEYWORD_ONLY.margin
        for candidate, value in zip(candidates, relevance.keyword_scores(candidates), strict=True):
            trace.scores[candidate.memory_id] = value
    else:
        threshold = request.min_score if explicit else default_min_score(project_min_score)
        margin = 0.0 if explicit else default_margin()
        try:
            stats = relevance.background(vectors, model=model)
        except EmbedderError as error:
            log.warning("relevance background unavailable: %s", error)
            trace.degraded.append("relevance_background_unavailable")
            stats = relevance.typical_background(len(vectors))
        trace.background = stats
        for candidate, found in zip(
            candidates, relevance.evidences(candidates, stats=stats, query_vectors=query_vectors), strict=True
        ):
            trace.evidence[candidate.memory_id] = found
            trace.scores[candidate.memory_id] = found.score
    trace.threshold, trace.margin = float(threshold or 0.0), margin
    trace.cut = max([trace.threshold, *(margin * value for value in trace.scores.values())])
    return relevance.select(list(trace.scores.items()), min_score=trace.threshold, margin=margin)


def _wants_judge(request: RetrieveRequest) -> bool:
    wanted = bool(getattr(settings, "MEMORYHUB_JUDGE", False)) if request.judge is None else request.judge
    return wanted and llm_configured()


def statuses_searched(request: RetrieveRequest) -> list[str]:
    return [Status.ACTIVE, Status.SUPERSEDED] if request.include_superseded else [Status.ACTIVE]


def _finish(
    project: Project, request: RetrieveRequest, trace: Trace, result: RetrieveResult, started: float
) -> RetrieveResult:
    trace.timed("total", started)
    result.degraded = list(trace.degraded)
    result.hypotheses = list(trace.hypotheses)
    result.timings_ms = dict(trace.timings)
    result.correlation_id = trace.correlation_id
    if request.logged:
        _log(project, request, trace, result)
    return result


def _log(project: Project, request: RetrieveRequest, trace: Trace, result: RetrieveResult) -> None:
    """One RetrievalLog row (a hash of the query, never its text).

    On its own transaction the row commits without waiting for its WAL flush
    (``synchronous_commit = off``): a log row lost in a crash costs nothing, and the answer does not
    wait for the disk. Inside a caller's transaction it is an ordinary insert, so that the
    caller's own commit keeps its durability."""
    if "database" in trace.degraded:
        return
    entry = RetrievalLog(
        project=project,
        user_id=request.user_id,
        correlation_id=trace.correlation_id,
        query_hash=hashlib.sha256((trace.query or request.query or "").encode()).hexdigest(),
        result_count=len(result.memories),
        memory_ids=[str(h.memory.pk) for h in result.memories],
        scores=[round(h.score, 4) for h in result.memories],
        latency_ms=trace.timings.get("total", 0.0),
        degraded=list(trace.degraded),
        timings=dict(trace.timings),
        cached=result.cached,
    )
    own_transaction = not connection.in_atomic_block
    try:
        with transaction.atomic():  # a savepoint inside the caller's: a failed insert leaves it usable
            if own_transaction:
                with connection.cursor() as cursor:
                    cursor.execute("SET LOCAL synchronous_commit = off")
            entry.save(force_insert=True)
    except DatabaseError:
        log.warning("retrieval log row not written", exc_info=True)
