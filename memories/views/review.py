"""The review queue: what capture proposed, where it came from, and approve / reject /
edit-then-approve, one by one or in bulk."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from memories import services, ui_selectors
from memories.forms import MemoryFieldsForm
from memories.models import Memory, Role, Status
from memories.views.access import Access, done, is_htmx, page_context, project_view, refuse
from memoryhub.errors import DomainError

TEMPLATE = "memories/review.html"
REJECT_REASON = "rejected in review"
EXCERPT_MESSAGES = 6
QUEUE_LIMIT = 100


@dataclass(frozen=True)
class ReviewItem:
    memory: Memory
    excerpt: str
    messages: list[dict[str, str]]
    confidence: Any
    proposed_supersedes: Any
    proposed_links: list[Any]
    reason: str
    form: MemoryFieldsForm


def _window(job: Any) -> list[dict[str, str]]:
    """The last few messages of the capture window, as role and text."""
    window = job.window if job is not None and isinstance(job.window, list) else []
    rows = [m for m in window if isinstance(m, dict) and m.get("content")]
    return [{"role": str(m.get("role", "")), "content": str(m["content"])[:600]} for m in rows[-EXCERPT_MESSAGES:]]


def review_item(memory: Memory, jobs: dict[str, Any]) -> ReviewItem:
    """Show whatever the memory's source and metadata hold; capture's format may grow."""
    source = memory.source if isinstance(memory.source, dict) else {}
    meta = memory.metadata if isinstance(memory.metadata, dict) else {}
    links = meta.get("related") or meta.get("proposed_links") or []
    initial = {name: getattr(memory, name) for name in ("content", "kind", "category", "importance")}
    return ReviewItem(
        memory=memory,
        excerpt=str(source.get("excerpt") or source.get("evidence") or meta.get("evidence") or ""),
        messages=_window(jobs.get(str(source.get("capture_job")))),
        confidence=meta.get("confidence"),
        proposed_supersedes=meta.get("supersedes") or meta.get("proposed_supersedes"),
        proposed_links=links if isinstance(links, list) else [links],
        reason=str(meta.get("reason") or ""),
        form=MemoryFieldsForm(initial=initial, project=memory.project, auto_id=f"id_{memory.pk}_%s"),
    )


def queue_context(access: Access, **extra: Any) -> dict[str, Any]:
    queryset = ui_selectors.review_queue(project=access.project)
    memories = list(queryset.select_related("project")[:QUEUE_LIMIT])
    jobs = ui_selectors.capture_jobs_by_id(project=access.project, memories=memories)
    items = [review_item(m, jobs) for m in memories]
    total = queryset.count() if len(memories) == QUEUE_LIMIT else len(memories)
    return page_context(access, items=items, total=total, nav="review", **extra)


@project_view()
def review_queue(request: HttpRequest, access: Access) -> HttpResponse:
    """Memories waiting for review, oldest first, with their origin and the classifier's proposal."""
    template = f"{TEMPLATE}#queue" if is_htmx(request) else TEMPLATE
    return render(request, template, queue_context(access))


def _answer(request: HttpRequest, access: Access, text: str) -> HttpResponse:
    back = reverse("memories:review", args=[access.project.slug])
    if not is_htmx(request):
        return done(request, text, back=back)
    # The card disappears (empty body); the count and the notice update out of band.
    remaining = ui_selectors.review_queue(project=access.project).count()
    return render(request, f"{TEMPLATE}#after_action", page_context(access, total=remaining, notice=text))


@project_view(Role.REVIEWER)
@require_POST
def review_approve(request: HttpRequest, access: Access, memory_id: str) -> HttpResponse:
    """Approve, saving the edits first when the form carried any (edit-then-approve)."""
    memory = ui_selectors.memory_in_project(project=access.project, memory_id=memory_id, with_deleted=False)
    back = reverse("memories:review", args=[access.project.slug])
    if memory.status != Status.PENDING_REVIEW:
        return refuse(request, "This memory is no longer waiting for review.", back=back, status=409)
    try:
        if "content" in request.POST:
            form = MemoryFieldsForm(request.POST, project=access.project)
            if not form.is_valid():
                return refuse(request, _errors(form), back=back, status=422)
            reason = form.cleaned_data["reason"] or "edited in review"
            services.memory_edit(memory=memory, changes=form.changes(), actor=access.actor, reason=reason)
        services.memory_approve(memory=memory, actor=access.actor)
    except DomainError as error:
        return refuse(request, error, back=back)
    return _answer(request, access, "Approved.")


def _errors(form: MemoryFieldsForm) -> str:
    return " ".join(f"{name}: {' '.join(str(e) for e in errors)}" for name, errors in form.errors.items())


@project_view(Role.REVIEWER)
@require_POST
def review_reject(request: HttpRequest, access: Access, memory_id: str) -> HttpResponse:
    """Reject: a soft delete with the reason "rejected in review"."""
    memory = ui_selectors.memory_in_project(project=access.project, memory_id=memory_id, with_deleted=False)
    if memory.status != Status.PENDING_REVIEW:
        back = reverse("memories:review", args=[access.project.slug])
        return refuse(request, "This memory is no longer waiting for review.", back=back, status=409)
    services.memory_delete(memory=memory, actor=access.actor, reason=REJECT_REASON)
    return _answer(request, access, "Rejected.")


@project_view(Role.REVIEWER)
@require_POST
def review_bulk(request: HttpRequest, access: Access) -> HttpResponse:
    """Approve or reject every ticked memory that is still waiting."""
    back = reverse("memories:review", args=[access.project.slug])
    action = request.POST.get("action")
    if action not in ("approve", "reject"):
        return refuse(request, "Choose approve or reject.", back=back, status=422)
    memories = ui_selectors.memories_by_ids(project=access.project, ids=request.POST.getlist("ids"))
    pending = [m for m in memories if m.status == Status.PENDING_REVIEW]
    for memory in pending:
        if action == "approve":
            services.memory_approve(memory=memory, actor=access.actor)
        else:
            services.memory_delete(memory=memory, actor=access.actor, reason=REJECT_REASON)
    text = f"{'Approved' if action == 'approve' else 'Rejected'} {len(pending)} memories."
    if not is_htmx(request):
        return done(request, text, back=back)
    return render(request, f"{TEMPLATE}#queue", queue_context(access, notice=text))
