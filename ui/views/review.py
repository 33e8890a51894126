"""The review queue: what capture proposed, where it came from, the user's existing memories
it collides with, and approve / reject / edit-then-approve / supersede-instead / merge, one
by one or in bulk, with undo of the last action (docs/adr/0049-review-queue-collisions-merge-undo.md)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from capture.models import CaptureJob
from common.errors import DomainError
from conversations.window import clean_window
from memories import lifecycle, review, services
from memories.models import Memory, MemoryEdge, Role, Status
from retrieval.embedding.protocol import EmbedderError
from retrieval.vectors.duplicates import similar_memories
from ui import selectors as ui_selectors
from ui.forms import MemoryFieldsForm, ReviewFilterForm
from ui.views.access import Access, done, is_htmx, page_context, project_view, refuse
from ui.views.consolidation import proposal_items, waiting_observations, waiting_total
from ui.views.review_undo import remember, undo_label, undo_last

TEMPLATE = "ui/review.html"
REJECT_REASON = "rejected in review"
EXCERPT_MESSAGES = 6
EXCERPT_CHARS = 600
QUEUE_LIMIT = 100
SIMILAR_PER_CARD = 3


@dataclass(frozen=True)
class SimilarItem:
    """An existing memory a proposal collides with, and the text a merge would start from."""

    memory: Memory
    cosine: float | None
    merged: str


@dataclass(frozen=True)
class ReviewItem:
    memory: Memory
    excerpt: str
    messages: list[dict[str, str]]
    confidence: Any
    proposed_supersedes: uuid.UUID | None
    proposed_links: list[MemoryEdge]
    reason: str
    form: MemoryFieldsForm
    similar: list[SimilarItem]


def _window(job: CaptureJob | None) -> list[dict[str, str]]:
    """The last few messages of the capture window, cleaned as capture cleans it."""
    if job is None or not isinstance(job.window, list):
        return []
    return [{**m, "content": m["content"][:EXCERPT_CHARS]} for m in clean_window(job.window)[-EXCERPT_MESSAGES:]]


def _uuid(value: Any) -> uuid.UUID | None:
    """``value`` as a memory id, or None when it is not one (metadata can be edited through the API)."""
    try:
        return uuid.UUID(str(value)) if value else None
    except ValueError:
        return None


def review_item(
    memory: Memory, jobs: dict[str, CaptureJob], similar: list[SimilarItem], returned: str = ""
) -> ReviewItem:
    """What capture recorded about a proposal (see capture.services.memory_draft and
    memory_source): ``source.excerpt`` and ``source.capture_job``; ``metadata.confidence``,
    ``reason``, ``evidence`` and ``proposed_supersedes``. Its proposed links are the links it
    was created with. ``returned``: why a memory came back to review ("what it rests on changed"),
    which is then its reason."""
    source = memory.source if isinstance(memory.source, dict) else {}
    meta = memory.metadata if isinstance(memory.metadata, dict) else {}
    initial = {name: getattr(memory, name) for name in ("content", "kind", "category", "importance")}
    return ReviewItem(
        memory=memory,
        excerpt=str(source.get("excerpt") or meta.get("evidence") or ""),
        messages=_window(jobs.get(str(source.get("capture_job")))),
        confidence=meta.get("confidence"),
        proposed_supersedes=_uuid(meta.get("proposed_supersedes")),
        proposed_links=list(memory.edges_out.all()),
        reason=returned or str(meta.get("reason") or ""),
        form=MemoryFieldsForm(initial=initial, project=memory.project),
        similar=similar,
    )


def _similar(access: Access, memories: list[Memory]) -> list[list[SimilarItem]]:
    """Per proposal, the end user's active memories closest to it by the engine's vectors."""
    queries = [(m.user_id, m.content) for m in memories]
    try:
        found = similar_memories(project=access.project, queries=queries, limit=SIMILAR_PER_CARD)
    except EmbedderError:
        # Without an embedder the cards still work, only without their collisions.
        return [[] for _ in memories]
    return [
        [SimilarItem(memory=h.memory, cosine=h.cosine, merged=f"{h.memory.content} {m.content}") for h in hits]
        for m, hits in zip(memories, found, strict=True)
    ]


def queue_context(request: HttpRequest, access: Access, query: QueryDict, **extra: Any) -> dict[str, Any]:
    """The filtered queue (up to QUEUE_LIMIT cards, each with its collisions) and the undo offer."""
    filter_form = ReviewFilterForm(query, project=access.project)
    queryset = ui_selectors.review_queue(project=access.project, **filter_form.filters())
    links = (
        MemoryEdge.objects.exclude(to_memory__status=Status.DELETED)
        .select_related("to_memory")
        .order_by("created_at", "pk")
    )
    memories = list(
        queryset.select_related("project").prefetch_related(Prefetch("edges_out", queryset=links))[:QUEUE_LIMIT]
    )
    jobs = ui_selectors.capture_jobs_by_id(project=access.project, memories=memories)
    returned = ui_selectors.returned_to_review(memories=memories)
    items = [
        review_item(m, jobs, similar, returned.get(str(m.pk), ""))
        for m, similar in zip(memories, _similar(access, memories), strict=True)
    ]
    # The heading counts everything waiting, as the count after each action does; the
    # filters say how many of those are shown.
    total = ui_selectors.review_queue(project=access.project).count()
    shown = queryset.count() if len(memories) == QUEUE_LIMIT else len(memories)
    # What consolidation proposed (docs/adr/0093-consolidation.md, 0110), of the end user filtered on.
    user_id = filter_form.filters().get("user_id", "")
    return page_context(
        access,
        items=items,
        consolidations=proposal_items(access, user_id=user_id),
        observations=waiting_observations(access, user_id=user_id),
        consolidation_total=waiting_total(access),
        total=total,
        shown=shown,
        filter_form=filter_form,
        undo=undo_label(request, access),
        nav="review",
        **extra,
    )


@project_view()
def review_queue(request: HttpRequest, access: Access) -> HttpResponse:
    """Memories waiting for review, oldest first, with their origin and the classifier's proposal."""
    template = f"{TEMPLATE}#queue" if is_htmx(request) else TEMPLATE
    return render(request, template, queue_context(request, access, request.GET))


def _answer(request: HttpRequest, access: Access, text: str) -> HttpResponse:
    back = reverse("ui:review", args=[access.project.slug])
    if not is_htmx(request):
        return done(request, text, back=back)
    # The card disappears (empty body); the count and the notice update out of band.
    remaining = ui_selectors.review_queue(project=access.project).count()
    context = page_context(access, total=remaining, notice=text, undo=undo_label(request, access))
    return render(request, f"{TEMPLATE}#after_action", context)


@project_view(Role.REVIEWER)
@require_POST
def review_approve(request: HttpRequest, access: Access, memory_id: str) -> HttpResponse:
    """Approve, saving the edits first when the form carried any (edit-then-approve)."""
    memory = ui_selectors.memory_in_project(project=access.project, memory_id=memory_id, with_deleted=False)
    back = reverse("ui:review", args=[access.project.slug])
    if memory.status != Status.PENDING_REVIEW:
        return refuse(request, "This memory is no longer waiting for review.", back=back, status=409)
    try:
        if "content" in request.POST:
            form = MemoryFieldsForm(request.POST, project=access.project)
            if not form.is_valid():
                return refuse(request, _errors(form), back=back, status=422)
            reason = form.cleaned_data["reason"] or "edited in review"
            services.memory_edit(memory=memory, changes=form.changes(), actor=access.actor, reason=reason)
        review.memory_approve(memory=memory, actor=access.actor)
    except DomainError as error:
        return refuse(request, error, back=back)
    remember(request, access, "Approved.", [{"op": "approve", "id": str(memory.pk)}])
    return _answer(request, access, "Approved.")


def _errors(form: MemoryFieldsForm) -> str:
    return " ".join(f"{name}: {' '.join(str(e) for e in errors)}" for name, errors in form.errors.items())


@project_view(Role.REVIEWER)
@require_POST
def review_reject(request: HttpRequest, access: Access, memory_id: str) -> HttpResponse:
    """Reject: a soft delete with the reason "rejected in review"."""
    memory = ui_selectors.memory_in_project(project=access.project, memory_id=memory_id, with_deleted=False)
    if memory.status != Status.PENDING_REVIEW:
        back = reverse("ui:review", args=[access.project.slug])
        return refuse(request, "This memory is no longer waiting for review.", back=back, status=409)
    lifecycle.memory_delete(memory=memory, actor=access.actor, reason=REJECT_REASON)
    remember(request, access, "Rejected.", [{"op": "reject", "id": str(memory.pk)}])
    return _answer(request, access, "Rejected.")


@project_view(Role.REVIEWER)
@require_POST
def review_bulk(request: HttpRequest, access: Access) -> HttpResponse:
    """Approve or reject every ticked memory that is still waiting."""
    back = reverse("ui:review", args=[access.project.slug])
    action = request.POST.get("action")
    if action not in ("approve", "reject"):
        return refuse(request, "Choose approve or reject.", back=back, status=422)
    memories = ui_selectors.memories_by_ids(project=access.project, ids=request.POST.getlist("ids"))
    pending = [m for m in memories if m.status == Status.PENDING_REVIEW]
    changed, steps = 0, []
    for memory in pending:
        # Another reviewer may have acted on it since the page was drawn: skip it and say so.
        try:
            if action == "approve":
                review.memory_approve(memory=memory, actor=access.actor)
            else:
                lifecycle.memory_delete(memory=memory, actor=access.actor, reason=REJECT_REASON)
        except DomainError:
            continue
        changed += 1
        steps.append({"op": action, "id": str(memory.pk)})
    text = f"{'Approved' if action == 'approve' else 'Rejected'} {changed} of {len(memories)} memories."
    if skipped := len(memories) - changed:
        text += f" {skipped} {'was' if skipped == 1 else 'were'} no longer waiting for review."
    remember(request, access, text, steps)
    if not is_htmx(request):
        return done(request, text, back=back)
    return render(request, f"{TEMPLATE}#queue", queue_context(request, access, request.POST, notice=text))


def _pending_pair(access: Access, memory_id: str, target_id: str) -> tuple[Memory, Memory]:
    memory = ui_selectors.memory_in_project(project=access.project, memory_id=memory_id, with_deleted=False)
    target = ui_selectors.memory_in_project(project=access.project, memory_id=target_id, with_deleted=False)
    return memory, target


@project_view(Role.REVIEWER)
@require_POST
def review_supersede_instead(request: HttpRequest, access: Access, memory_id: str, target_id: str) -> HttpResponse:
    """Approve the proposal as the successor of an existing memory it collides with."""
    memory, target = _pending_pair(access, memory_id, target_id)
    back = reverse("ui:review", args=[access.project.slug])
    reason = "superseded instead, in review"
    try:
        review.memory_approve_superseding(memory=memory, target=target, actor=access.actor, reason=reason)
    except DomainError as error:
        return refuse(request, error, back=back)
    text = "Approved as the successor of the existing memory."
    remember(request, access, text, [{"op": "approve", "id": str(memory.pk)}])
    return _answer(request, access, text)


@project_view(Role.REVIEWER)
@require_POST
def review_merge(request: HttpRequest, access: Access, memory_id: str, target_id: str) -> HttpResponse:
    """Merge the proposal into an existing memory: it takes the combined text, the proposal is rejected."""
    memory, target = _pending_pair(access, memory_id, target_id)
    back = reverse("ui:review", args=[access.project.slug])
    content = request.POST.get("content", "").strip() or f"{target.content} {memory.content}"
    before = target.content
    try:
        merged = review.memory_merge_proposal(memory=memory, target=target, content=content, actor=access.actor)
    except DomainError as error:
        return refuse(request, error, back=back)
    step = {"op": "merge", "id": str(memory.pk), "into": str(target.pk), "before": before, "merged": merged.content}
    remember(request, access, "Merged into the existing memory.", [step])
    return _answer(request, access, "Merged into the existing memory.")


@project_view(Role.REVIEWER)
@require_POST
def review_undo(request: HttpRequest, access: Access) -> HttpResponse:
    """Reverse the last review action of this reviewer on this project, then show the queue."""
    back = reverse("ui:review", args=[access.project.slug])
    try:
        text = undo_last(request, access)
    except DomainError as error:
        return refuse(request, error, back=back)
    if not is_htmx(request):
        return done(request, text, back=back)
    return render(request, f"{TEMPLATE}#queue", queue_context(request, access, request.POST, notice=text))
