"""The answer of a retrieve: what the ranking kept, memories and episodes in one order, packed with
the user's profile into the token budget (``ranking.packing``), as the ``RetrieveResult`` the API
returns.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from django.conf import settings

from memories.models import Memory, Project
from profiles.selectors import profile_find
from retrieval.ranking import episodes
from retrieval.ranking.packing import PackItem, ProfileFact, pack
from retrieval.ranking.search import Candidate
from retrieval.shapes import Hit, RetrieveRequest, RetrieveResult, Trace

# How much of what an episode replies to the injection shows with it.
EPISODE_CONTEXT_CHARS = 160


def build_result(
    ranked: list[tuple[Memory, float]],
    chains: dict[str, list[Memory]],
    *,
    request: RetrieveRequest,
    project: Project,
    trace: Trace,
    said: Sequence[episodes.Episode] = (),
) -> RetrieveResult:
    """Pack into the token budget; the memories and episodes that fit, in packing order.

    Both are packed in one ranking, best score first (a memory before an episode on a tie), up
    to the request's limit.
    """
    started = time.perf_counter()
    budget = project.token_budget if request.token_budget is None else request.token_budget
    items = [
        PackItem(
            id=str(m.pk),
            content=m.content,
            kind=m.kind,
            category=m.category,
            scope=m.scope,
            version=m.version,
            supersedes_content=chains[str(m.pk)][0].content if chains.get(str(m.pk)) else None,
            score=s,
        )
        for m, s in ranked
    ]
    items += [
        PackItem(
            id=e.key,
            content=f"(in reply to: {e.context[:EPISODE_CONTEXT_CHARS]})\n{e.content}" if e.context else e.content,
            kind="episode",
            category="",
            scope="",
            version=0,
            score=e.score,
            heading=f"{'the user' if e.role == 'user' else 'the assistant'} said on {e.said_at.date().isoformat()}",
        )
        for e in said
    ]
    if said:
        items = sorted(items, key=lambda item: -item.score)[: request.limit]
    facts, version = profile_facts(project, request)
    share = float(settings.MEMORYHUB_PROFILE_BUDGET_SHARE)
    packed = pack(items, token_budget=budget, profile=facts, profile_share=share)
    trace.excluded_ids = packed.excluded_ids
    by_id = {str(m.pk): (m, s) for m, s in ranked}
    by_key = {e.key: e for e in said}
    candidates = {c.memory_id: c for c in trace.candidates}
    hits = [_hit(*by_id[i], chains, candidates.get(i), trace) for i in packed.included_ids if i in by_id]
    trace.timed("pack", started)
    return RetrieveResult(
        memories=hits,
        episodes=[by_key[i] for i in packed.included_ids if i in by_key],
        injection=packed.injection,
        token_count=packed.token_count,
        truncated=packed.truncated,
        profile=_profile_out(version, packed.profile_facts, packed.profile_tokens),
    )


def profile_facts(project: Project, request: RetrieveRequest) -> tuple[list[ProfileFact], int]:
    """The user's profile facts, in the profile's order, and its version (none when the request
    turns it off, or before a profile was built)."""
    profile = profile_find(project=project, user_id=request.user_id) if request.profile else None
    if profile is None:
        return [], 0
    facts = [ProfileFact(str(f["text"]), tuple(str(i) for i in f.get("memory_ids", ()))) for f in profile.facts]
    return facts, profile.version


def _profile_out(version: int, facts: Sequence[ProfileFact], tokens: int) -> dict[str, Any] | None:
    if not facts:
        return None
    return {
        "version": version,
        "text": "\n".join("- " + " ".join(f.text.split()) for f in facts),
        "token_count": tokens,
        "facts": [{"text": f.text, "memory_ids": list(f.memory_ids)} for f in facts],
    }


def _hit(
    memory: Memory, value: float, chains: dict[str, list[Memory]], candidate: Candidate | None, trace: Trace
) -> Hit:
    memory_id = str(memory.pk)
    matched_by = list(candidate.matched_by) if candidate else []
    if memory_id in trace.graph_paths:
        matched_by.append("graph")
    return Hit(memory, round(value, 4), tuple(matched_by), tuple(chains.get(memory_id, [])))
