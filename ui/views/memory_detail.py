"""One memory's page: fields, inline edit, history with diffs, supersede chain, links,
and the status actions (approve, archive, delete, restore) that rows share."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from common.errors import DomainError, NotFound
from memories import edges, lifecycle, review, selectors, services
from memories.models import Memory, MemoryEdge, Relationship, Role
from ui import page_selectors
from ui import selectors as ui_selectors
from ui.forms import LinkForm, MemoryFieldsForm
from ui.views.access import Access, done, is_htmx, next_url, page_context, project_view, refuse
from ui.views.diffing import revision_view

TEMPLATE = "ui/memory.html"
STATUS_ACTIONS = {
    "approve": review.memory_approve,
    "archive": lifecycle.memory_archive,
    "delete": lifecycle.memory_delete,
    "restore": lifecycle.memory_restore,
}


def memory_url(memory: Memory) -> str:
    return reverse("ui:memory", args=[memory.project.slug, memory.pk])


def fields_form(memory: Memory, data: Any = None) -> MemoryFieldsForm:
    initial = {name: getattr(memory, name) for name in ("content", "kind", "category", "importance")}
    return MemoryFieldsForm(data, initial=initial, project=memory.project)


# How a link reads from each end: "A refines B" is "B refined by A" on B's page.
LINK_WORDS: dict[str, tuple[str, str]] = {
    Relationship.RELATED: ("related to", "related to"),
    Relationship.REFINES: ("refines", "refined by"),
    Relationship.CONTRADICTS: ("contradicts", "contradicted by"),
    Relationship.SUPERSEDES: ("supersedes", "superseded by"),
    Relationship.DERIVED_FROM: ("derived from", "source of"),
}


@dataclass(frozen=True)
class LinkRow:
    edge: MemoryEdge
    words: str
    other: Memory


def link_rows(memory: Memory) -> list[LinkRow]:
    """The memory's links worded from this page's side."""
    rows = []
    for edge in ui_selectors.memory_links(memory=memory):
        outgoing = edge.from_memory_id == memory.pk
        words = LINK_WORDS.get(edge.relationship, (edge.relationship, f"{edge.relationship} (from)"))
        other = edge.to_memory if outgoing else edge.from_memory
        rows.append(LinkRow(edge=edge, words=words[0] if outgoing else words[1], other=other))
    return rows


def capture_job_url(slug: str, job_id: str) -> str:
    return reverse("ui:capture_job", args=[slug, job_id])


@dataclass(frozen=True)
class NamedActor:
    label: str
    url: str = ""


def named_actors(access: Access, raws: list[str]) -> dict[str, NamedActor]:
    """Readable actors, a capture job's linking to its page."""
    slug = access.project.slug
    named = page_selectors.actors_named(project=access.project, actors=raws)
    return {
        raw: NamedActor(label=a.label, url=capture_job_url(slug, a.job_id) if a.job_id else "")
        for raw, a in named.items()
    }


def detail_context(access: Access, memory: Memory, **overrides: Any) -> dict[str, Any]:
    """Everything the page shows; ``overrides`` carry a bound form with errors or the edit mode."""
    revisions = [revision_view(r) for r in memory.revisions.order_by("-created_at", "-id")]
    actors = named_actors(access, [memory.created_by, *(item.revision.actor for item in revisions)])
    source = page_selectors.memory_source(memory=memory)
    context = page_context(
        access,
        memory=memory,
        history=[(item, actors[item.revision.actor]) for item in revisions],
        creator=actors[memory.created_by],
        source=source,
        source_job_url=capture_job_url(access.project.slug, source.job_id) if source and source.job_id else "",
        chain=selectors.supersede_chain(memory=memory, user_id=memory.user_id),
        links=link_rows(memory),
        link_form=LinkForm(),
        edit_form=fields_form(memory),
        supersede_form=fields_form(memory),
        editing=False,
        nav="memories",
    )
    return {**context, **overrides}


def render_detail(request: HttpRequest, context: dict[str, Any], status: int = 200) -> HttpResponse:
    template = f"{TEMPLATE}#detail" if is_htmx(request) else TEMPLATE
    return render(request, template, context, status=status)


@project_view()
def memory_detail(request: HttpRequest, access: Access, memory_id: str) -> HttpResponse:
    """A memory with its history, chain and links."""
    memory = ui_selectors.memory_in_project(project=access.project, memory_id=memory_id)
    return render_detail(request, detail_context(access, memory))


@project_view(Role.REVIEWER)
def memory_edit(request: HttpRequest, access: Access, memory_id: str) -> HttpResponse:
    """GET: the page in edit mode. POST: save through memory_edit (writes a revision)."""
    memory = ui_selectors.memory_in_project(project=access.project, memory_id=memory_id, with_deleted=False)
    if request.method != "POST":
        return render_detail(request, detail_context(access, memory, editing=True))
    form = fields_form(memory, request.POST)
    if not form.is_valid():
        return render_detail(request, detail_context(access, memory, editing=True, edit_form=form), status=422)
    try:
        services.memory_edit(
            memory=memory, changes=form.changes(), actor=access.actor, reason=form.cleaned_data["reason"]
        )
    except DomainError as error:
        form.add_error(None, error.message)
        return render_detail(request, detail_context(access, memory, editing=True, edit_form=form), status=422)
    memory = ui_selectors.memory_in_project(project=access.project, memory_id=memory_id)
    if not is_htmx(request):
        return done(request, "Saved.", back=memory_url(memory))
    return render_detail(request, detail_context(access, memory, notice="Saved."))


@project_view(Role.REVIEWER)
@require_POST
def memory_supersede(request: HttpRequest, access: Access, memory_id: str) -> HttpResponse:
    """Write a successor with the form's fields; the memory becomes superseded."""
    memory = ui_selectors.memory_in_project(project=access.project, memory_id=memory_id, with_deleted=False)
    form = fields_form(memory, request.POST)
    if not form.is_valid():
        return render_detail(request, detail_context(access, memory, supersede_form=form), status=422)
    draft = services.MemoryDraft(
        user_id=memory.user_id, scope=memory.scope, metadata=dict(memory.metadata), **form.changes()
    )
    try:
        successor = services.memory_supersede(
            memory=memory, draft=draft, actor=access.actor, reason=form.cleaned_data["reason"]
        )
    except DomainError as error:
        return refuse(request, error, back=memory_url(memory))
    successor.project = access.project
    if is_htmx(request):
        return HttpResponseClientRedirect(memory_url(successor))
    return done(request, f"Version {successor.version} written.", back=memory_url(successor))


def _status_response(request: HttpRequest, access: Access, memory: Memory, text: str) -> HttpResponse:
    """Answer in the shape the caller asked for: a list row, the detail region, or a redirect."""
    view = request.POST.get("view", "")
    if not is_htmx(request):
        return done(request, text, back=next_url(request, memory_url(memory)))
    if view == "row":
        return render(
            request, "ui/list.html#row", page_context(access, memory=memory, here=request.POST.get("next", ""))
        )
    return render_detail(request, detail_context(access, memory, notice=text))


@project_view(Role.REVIEWER)
@require_POST
def memory_status(request: HttpRequest, access: Access, memory_id: str, action: str) -> HttpResponse:
    """Approve, archive, delete or restore one memory."""
    if action not in STATUS_ACTIONS:
        raise Http404("no such action")
    memory = ui_selectors.memory_in_project(project=access.project, memory_id=memory_id)
    service = STATUS_ACTIONS[action]
    try:
        service(memory=memory, actor=access.actor, reason=request.POST.get("reason", "")[:500])
    except DomainError as error:
        return refuse(request, error, back=next_url(request, memory_url(memory)))
    memory = ui_selectors.memory_in_project(project=access.project, memory_id=memory_id)
    verb = {"approve": "Approved", "archive": "Archived", "delete": "Deleted", "restore": "Restored"}[action]
    return _status_response(request, access, memory, f"{verb}.")


@project_view(Role.REVIEWER)
@require_POST
def link_add(request: HttpRequest, access: Access, memory_id: str) -> HttpResponse:
    """Link this memory to another one its end user can see."""
    memory = ui_selectors.memory_in_project(project=access.project, memory_id=memory_id, with_deleted=False)
    form = LinkForm(request.POST)
    target = None
    if form.is_valid():
        try:
            target = selectors.memory_get_visible(
                project=access.project, user_id=memory.user_id, memory_id=form.cleaned_data["target"]
            )
        except NotFound:
            form.add_error("target", "That memory is not one this end user can see.")
    if target is None:
        return render_detail(request, detail_context(access, memory, link_form=form), status=422)
    try:
        edges.edge_link(
            source=memory, target=target, relationship=form.cleaned_data["relationship"], actor=access.actor
        )
    except DomainError as error:
        return refuse(request, error, back=memory_url(memory))
    if not is_htmx(request):
        return done(request, "Linked.", back=memory_url(memory))
    return render_detail(request, detail_context(access, memory, notice="Linked."))


@project_view(Role.REVIEWER)
@require_POST
def link_remove(request: HttpRequest, access: Access, memory_id: str, edge_id: int) -> HttpResponse:
    """Remove one link from or to this memory."""
    memory = ui_selectors.memory_in_project(project=access.project, memory_id=memory_id)
    edge = ui_selectors.edge_in_project(project=access.project, edge_id=edge_id)
    if memory.pk not in (edge.from_memory_id, edge.to_memory_id):
        return refuse(request, "That link does not belong to this memory.", back=memory_url(memory), status=404)
    edges.edge_unlink(
        source=edge.from_memory, target=edge.to_memory, relationship=edge.relationship, actor=access.actor
    )
    if not is_htmx(request):
        return done(request, "Link removed.", back=memory_url(memory))
    return render_detail(request, detail_context(access, memory, notice="Link removed."))


@project_view(Role.REVIEWER)
def link_search(request: HttpRequest, access: Access, memory_id: str) -> HttpResponse:
    """The link picker's choices: this end user's memories containing the typed text."""
    memory = ui_selectors.memory_in_project(project=access.project, memory_id=memory_id, with_deleted=False)
    text = request.GET.get("q", "")[:200]
    found = page_selectors.link_search(memory=memory, text=text)
    context = page_context(access, memory=memory, found=found, searched=text.strip())
    return render(request, f"{TEMPLATE}#link-options", context)
