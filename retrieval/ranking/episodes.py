"""Episodes: the user's own captured messages, searched beside the memories distilled from them.

An extractor misses things people say in passing ("we adopted a greyhound on saturday, her name is
Pixel"); the message itself is still kept (``capture.services.capture_submit``), so a question
about it can still be answered in the user's own words. Episodes are found the way memories are,
by meaning (the messages' vectors, and those of their sentences and clauses: the best of them,
``retrieval.vectors.message_vectors``) and by their words (an IDF-weighted
share of the query's words, the same signal the memory search calls ``coverage``), and scored by the
same relevance model, so one cut and one ranking hold both (``retrieval.engine``).

Only the user's messages with text are episodes: the assistant's words are the agent's own, and
they echo the user's topic without stating anything about them (they are kept as the next
message's ``context``). Isolation is the memories': the
statement names the project and the end user, and the tables' row policies apply to the API's role.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from common import prepared
from conversations.dates import annotate
from conversations.models import Message
from memories.fields import vector_literal, vectors_from_binary
from memories.models import Memory, Project
from retrieval.ranking import relevance
from retrieval.ranking.search import Candidate

# How many episodes each half (meaning, words) proposes before scoring.
EPISODE_DEPTH = 30
# Two messages are about the same thing when some passage of one is this close to some passage of
# the other (MiniLM cosine; "we deploy to fly.io" / "we actually dropped fly.io": 0.58, "i use zsh"
# / "switched to fish shell": 0.59). Chosen on the natural sets' dev people
# (docs/adr/0124-passages-and-the-news-first.md).
SAME_TOPIC = 0.4
# An episode's id in the shared ranking, so it cannot collide with a memory's.
PREFIX = "episode:"
# An episode whose memory was superseded keeps this share of its score: still findable, below the news.
OUTDATED_FACTOR = 0.5
# A later message saying that something changed: what an earlier one said about the same thing
# (a shared word, stemmed and without stop words) is outdated ("trip to sicily in june" after
# "sicily is postponed to september"; "i'm going solo" after "not solo anymore").
_CHANGED = re.compile(
    r"\b(?:any ?more|no longer|instead|actually|switched|changed|moved|postponed|rescheduled|"
    r"pushed (?:back|out|to)|cancell?ed|dropped|ditched|quit|stopped|update)\b",
    re.IGNORECASE,
)
# A message whose memories left out this share of its words is returned beside them (a filler or
# two, "honestly", "lol", stay under it; docs/adr/0117-a-message-stays-beside-a-partial-memory.md).
SAYS_MORE = 0.4
# "Near" a change word: this many characters either side; words compared by their first letters
# (the full-text stems of the earlier message against the later one's words as written).
_REACH, _STEM, _MIN_WORD = 40, 5, 4


@dataclass
class Episode:
    """One message found for a query: what was said, by whom, when, and how it was found."""

    id: str
    conversation_id: str
    session_id: str
    role: str
    content: str
    said_at: datetime
    correlation_id: str = ""
    # The message before it (what it replies to), cut.
    context: str = ""
    score: float = 0.0
    matched_by: tuple[str, ...] = ()
    candidate: Candidate | None = field(default=None, repr=False)
    # A memory it became was superseded since, or a later message said it changed: it ranks
    # below what replaced it.
    outdated: bool = False
    # Its words as the full-text search reads them (stemmed, no stop words).
    words: frozenset[str] = field(default=frozenset(), repr=False)
    # What it says, by meaning: its passages' vectors, else its own (``message_vectors.passages``).
    vectors: np.ndarray | None = field(default=None, repr=False)
    # The latest message among those found that says this one changed.
    overtaken_by: Episode | None = field(default=None, repr=False)

    @property
    def key(self) -> str:
        return PREFIX + self.id


def _statement(vector_count: int) -> str:
    distances = ", ".join(
        f"CASE WHEN mine.embedding_model = %(model)s THEN mine.embedding <=> %(v{i})s::vector END"
        for i in range(vector_count)
    )
    nearest = (
        f"""SELECT id FROM mine WHERE embedding_model = %(model)s
            ORDER BY LEAST({", ".join(f"embedding <=> %(v{i})s::vector" for i in range(vector_count))})
            LIMIT %(depth)s"""
        if vector_count
        else "SELECT NULL::uuid AS id WHERE false"
    )
    return f"""
WITH mine AS MATERIALIZED (
    SELECT m.id, m.search, m.embedding, m.embedding_model
    FROM memories_message m JOIN memories_conversation c ON c.id = m.conversation_id
    WHERE c.project_id = %(project)s AND c.user_id = %(user)s
      AND m.role = 'user' AND m.content <> ''
),
lexemes AS (
    SELECT w.lexeme FROM unnest(tsvector_to_array(to_tsvector('english', %(query)s))) AS w(lexeme)
),
-- Which message holds which of the query's words: read once, for both the weights and the shares.
hits AS MATERIALIZED (
    SELECT mine.id, lexemes.lexeme
    FROM mine JOIN lexemes ON mine.search @@ quote_literal(lexemes.lexeme)::tsquery
),
words AS (
    SELECT lexemes.lexeme,
           ln(((SELECT count(*) FROM mine) + 1.0) / (count(hits.id) + 1.0)) + 0.1 AS weight
    FROM lexemes LEFT JOIN hits ON hits.lexeme = lexemes.lexeme
    GROUP BY lexemes.lexeme
),
keyword AS (
    SELECT hits.id, sum(words.weight) / (SELECT sum(weight) FROM words) AS coverage
    FROM hits JOIN words ON words.lexeme = hits.lexeme
    GROUP BY hits.id
    ORDER BY coverage DESC, hits.id
    LIMIT %(depth)s
),
nearest AS ({nearest})
SELECT mine.id::text, keyword.coverage, mine.id IN (SELECT id FROM nearest),
       ARRAY[{distances or "NULL::float8"}]::float8[],
       EXISTS (SELECT 1 FROM memories_memory old
               WHERE old.project_id = %(project)s AND old.user_id = %(user)s AND old.status = 'superseded'
                 AND old.source -> 'messages' @> jsonb_build_array(jsonb_build_object('id', mine.id::text))),
       tsvector_to_array(to_tsvector('english', m.content)),
       CASE WHEN m.embedding_model = %(model)s THEN m.passage_vectors END,
       CASE WHEN m.embedding_model = %(model)s THEN vector_send(m.embedding) END,
       c.id::text, c.session_id, m.role, m.content, m.context, coalesce(m.said_at, m.created_at), m.correlation_id
FROM mine LEFT JOIN keyword ON keyword.id = mine.id
JOIN memories_message m ON m.id = mine.id JOIN memories_conversation c ON c.id = m.conversation_id
WHERE mine.id IN (SELECT id FROM keyword) OR mine.id IN (SELECT id FROM nearest)
"""


def find(
    *,
    project: Project,
    user_id: str,
    query: str,
    model: str,
    vectors: np.ndarray | None,
    query_vectors: int,
    depth: int = EPISODE_DEPTH,
) -> list[Episode]:
    """The user's episodes that match ``query`` by words or by any of ``vectors`` (the first
    ``query_vectors`` rows are the query's, the rest HyDE's), each with a ``Candidate`` for scoring."""
    rows_of = [] if vectors is None else list(vectors)
    count = len(rows_of)
    params: dict[str, Any] = {"project": project.pk, "user": user_id, "query": query, "model": model, "depth": depth}
    params.update({f"v{index}": vector_literal(row) for index, row in enumerate(rows_of)})
    with prepared.cursor() as cursor:  # planned once per connection (common/prepared.py)
        cursor.execute(_statement(count), params)
        rows = cursor.fetchall()
    said = [_said(row[7], row[6]) for row in rows]
    # A question asks about one of a message's clauses: the best of the message and its passages,
    # all passages of all candidates against the query vectors in one product.
    best = _best_passages(said, vectors)
    found = []
    for index, (message_id, coverage, near, distances, outdated, words, _, _, *message) in enumerate(rows):
        cosines = [None if d is None else 1.0 - float(d) for d in (distances or [])]
        asked = [c for c in cosines[:query_vectors] if c is not None]
        hyde = [c for c in cosines[query_vectors:] if c is not None]
        if index in best:
            asked, hyde = asked + best[index][:query_vectors], hyde + best[index][query_vectors:]
        matched_by = [name for name, hit in (("keyword", coverage is not None), ("vector", near)) if hit]
        # Its relative dates are read only if it is returned (``date``): most candidates are not.
        episode = _episode(message_id, *message, dated=False)
        # A message whose memory a later one superseded: what it said has changed since.
        episode.outdated, episode.matched_by, episode.words = outdated, tuple(matched_by), frozenset(words)
        episode.vectors = said[index]
        episode.candidate = Candidate(
            memory_id=episode.key,
            rrf=0.0,
            cosine=max(asked) if asked else None,
            hyde_cosine=max(hyde) if hyde else None,
            keyword_coverage=None if coverage is None else float(coverage),
            keyword_rank=None if coverage is None else 0,
            matched_by=matched_by,
        )
        found.append(episode)
    _overtaken(found)
    return found


def _said(whole: bytes | None, passage_vectors: bytes | None) -> np.ndarray | None:
    """What a message says, by meaning: its passages' vectors (float32 rows), else its own vector
    (pgvector's binary form); None when it has none in the query's model."""
    if whole is None:
        return None
    vector = vectors_from_binary(bytes(whole), 1)
    if not passage_vectors:
        return vector
    return np.frombuffer(passage_vectors, dtype=np.float32).reshape(-1, vector.shape[1])


def _best_passages(said: Sequence[np.ndarray | None], vectors: np.ndarray | None) -> dict[int, list[float]]:
    """Per message with vectors (by index), the best cosine of what it says (``_said``) with each
    query vector (for a message without passages, its own vector's: the cosine it already has)."""
    chosen = {i: rows for i, rows in enumerate(said) if rows is not None}
    if vectors is None or not chosen:
        return {}
    best = _best_per_block(list(chosen.values()), np.asarray(vectors, dtype=np.float32).T)
    return dict(zip(chosen, best.tolist(), strict=True))


def _best_per_block(blocks: list[np.ndarray], other: np.ndarray) -> np.ndarray:
    """The rows of ``blocks`` stacked, times ``other``; per block, the largest of each column."""
    best: np.ndarray = np.maximum.reduceat(np.concatenate(blocks) @ other, _starts(blocks), axis=0)
    return best


def _starts(blocks: list[np.ndarray]) -> np.ndarray:
    """Where each block begins among the blocks' rows stacked."""
    return np.cumsum([0] + [len(block) for block in blocks[:-1]])


def _overtaken(found: Sequence[Episode]) -> None:
    """Mark each episode a later one among ``found`` says has changed: a ``_CHANGED`` word with,
    within a few words of it, a word of the earlier episode ("sicily is postponed"), or anywhere
    in a message about the same thing ("switched to fish shell" after "i use zsh")."""
    changes = [(index, e, near) for index, e in enumerate(found) if (near := _near_changes(e.content))]
    if not changes:
        return
    close = _same_topics(found)
    for position, older in enumerate(found):
        stems = {w[:_STEM] for w in older.words if len(w) >= _MIN_WORD}
        later = [
            n for index, n, near in changes if n.said_at > older.said_at and (stems & near or close[index, position])
        ]
        if later:
            older.outdated, older.overtaken_by = True, max(later, key=lambda n: n.said_at)


def _same_topics(found: Sequence[Episode]) -> np.ndarray:
    """For each pair of episodes, whether some passage of one is within ``SAME_TOPIC`` of some
    passage of the other (one product over all their passages)."""
    close = np.zeros((len(found), len(found)), dtype=bool)
    chosen = {i: e.vectors for i, e in enumerate(found) if e.vectors is not None}
    if not chosen:
        return close
    blocks = list(chosen.values())
    # Per message, the best of its passages against every passage; then per pair of messages.
    best = np.maximum.reduceat(_best_per_block(blocks, np.concatenate(blocks).T), _starts(blocks), axis=1)
    close[np.ix_(list(chosen), list(chosen))] = best >= SAME_TOPIC
    return close


def _near_changes(content: str) -> set[str]:
    """The words (cut to ``_STEM`` letters) around each change word of ``content``."""
    near: set[str] = set()
    for match in _CHANGED.finditer(content):
        around = content[max(0, match.start() - _REACH) : match.end() + _REACH].lower()
        near.update(w[:_STEM] for w in re.findall(r"[a-z]+", around) if len(w) >= _MIN_WORD)
    return near


def _episode(
    message_id: str, conversation_id: str, session_id: str, role: str, content: str, context: str,
    said_at: datetime, correlation_id: str, *, dated: bool = True,
) -> Episode:  # fmt: skip
    return Episode(
        id=message_id,
        conversation_id=conversation_id,
        session_id=session_id,
        role=role,
        # Relative dates as said, each with the day it meant ("on saturday (2026-03-07)").
        content=annotate(content, said_at.date()) if dated else content,
        said_at=said_at,
        correlation_id=correlation_id,
        context=context,
    )


def date(said: Sequence[Episode]) -> None:
    """Write beside each relative date of these episodes the day it meant (``find`` leaves them as said)."""
    for episode in said:
        episode.content = annotate(episode.content, episode.said_at.date())


def load(*, project: Project, user_id: str, ids: Sequence[str]) -> list[Episode]:
    """The user's episodes among ``ids`` (others' and missing ones are left out), in ``ids`` order."""
    if not ids:
        return []
    rows = (
        Message.objects.filter(
            pk__in=list(ids),
            conversation__project=project,
            conversation__user_id=user_id,
            role="user",
        )
        .select_related("conversation")
        .only(
            "id",
            "role",
            "content",
            "context",
            "said_at",
            "created_at",
            "correlation_id",
            "conversation__id",
            "conversation__session_id",
        )
    )
    by_id = {
        str(m.pk): _episode(
            str(m.pk), str(m.conversation.pk), m.conversation.session_id, m.role, m.content, m.context,
            m.said_at or m.created_at, m.correlation_id,
        )
        for m in rows
    }  # fmt: skip
    return [by_id[i] for i in ids if i in by_id]


def score(found: Sequence[Episode], *, stats: relevance.Background | None, query_vectors: int) -> None:
    """Each episode's relevance by the model that scores memories the same way (an outdated one at
    ``OUTDATED_FACTOR``): the fitted model, or without query vectors (``stats`` None) the same model
    without its vector features."""
    candidates = [e.candidate for e in found if e.candidate is not None]
    if stats is None:
        values = relevance.keyword_scores(candidates)
    else:
        values = [e.score for e in relevance.evidences(candidates, stats=stats, query_vectors=query_vectors)]
    for episode, value in zip(found, values, strict=True):
        episode.score = value * OUTDATED_FACTOR if episode.outdated and episode.overtaken_by is None else value
    # What a later message changed ranks below it, and the later one at least as high as what
    # it changed: it is about the same thing, and it is the news ("japan got pushed to october"
    # for "when are we going to japan", after "booking japan for april").
    for older in sorted(found, key=lambda e: e.said_at):
        if older.overtaken_by is not None:
            older.overtaken_by.score = max(older.overtaken_by.score, older.score)
            older.score *= OUTDATED_FACTOR


def without_sources(
    ranked: list[tuple[Memory, float]], said: list[Episode]
) -> tuple[list[tuple[Memory, float]], list[Episode]]:
    """A memory and the message it came from are not both returned: the memory stays, at the
    better of the two scores, and the message goes -- unless the message says more than its
    memories kept (``SAYS_MORE`` of its words are in none of them: "observability for ml
    pipelines. my colleague june co-presented" kept as "The user's colleague june
    co-presented."), when both stay."""
    sources: dict[str, list[int]] = {}
    for index, (memory, _) in enumerate(ranked):
        for reference in (memory.source or {}).get("messages") or []:
            if isinstance(reference, dict) and reference.get("id"):
                sources.setdefault(str(reference["id"]), []).append(index)
    if not sources:
        return ranked, said
    ranked = list(ranked)
    kept: list[Episode] = []
    for episode in said:
        indexes = sources.get(episode.id)
        if indexes is None or _says_more(episode.content, [ranked[i][0].content for i in indexes]):
            kept.append(episode)
            continue
        for index in indexes:
            ranked[index] = (ranked[index][0], max(ranked[index][1], episode.score))
    return ranked, kept


def _says_more(message: str, memories: Sequence[str]) -> bool:
    """Whether ``SAYS_MORE`` of ``message``'s words (stemmed, as ``_near_changes`` compares them)
    are in none of ``memories``."""
    said = stems(message)
    told = set().union(*(stems(text) for text in memories))
    return bool(said) and len(said - told) >= SAYS_MORE * len(said)


def stems(text: str) -> set[str]:
    """The words of ``text`` as the change detection compares them: four letters or more, cut to five."""
    return {w[:_STEM] for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= _MIN_WORD}
