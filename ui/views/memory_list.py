"""The project's memory list: filters, sorting, in-place pagination, row and bulk actions."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from common.errors import DomainError
from memories import lifecycle, review, services
from memories.models import Memory, Role, Status
from ui import selectors as ui_selectors
from ui.forms import BulkForm, MemoryFilterForm
from ui.views.access import Access, done, is_htmx, next_url, page_context, project_view, query_of, refuse

PAGE_SIZE = 25
TEMPLATE = "ui/list.html"


def list_context(request: HttpRequest, access: Access, query: QueryDict) -> dict[str, Any]:
    """Filters, the current page of rows, and (for the whole page only) the forms around them.

    htmx requests get the ``#rows`` region alone, which needs neither the end-user
    suggestions nor the bulk form.
    """
    form = MemoryFilterForm(query, project=access.project)
    filters = form.filters()
    queryset = ui_selectors.memories_for_project(project=access.project, filters=filters)
    page = Paginator(queryset, PAGE_SIZE).get_page(query.get("page"))
    list_url = reverse("ui:list", args=[access.project.slug])
    around = (
        {}
        if is_htmx(request)
        else {
            "end_users": ui_selectors.end_users(project=access.project),
            "bulk_form": BulkForm(project=access.project),
        }
    )
    return page_context(
        access,
        form=form,
        filters=filters,
        query=query,
        page=page,
        here=f"{list_url}?{query.urlencode()}" if query else list_url,
        nav="memories",
        **around,
    )


@project_view()
def memory_list(request: HttpRequest, access: Access) -> HttpResponse:
    """Every end user's memories; htmx requests (filters, pages) get only the rows region."""
    context = list_context(request, access, request.GET)
    return render(request, f"{TEMPLATE}#rows" if is_htmx(request) else TEMPLATE, context)


def _apply(access: Access, memory: Memory, action: str, category: str) -> bool:
    """One bulk action on one memory; False when it does not apply (e.g. approving an active one)."""
    actor = access.actor
    if action == "approve":
        if memory.status != Status.PENDING_REVIEW:
            return False
        review.memory_approve(memory=memory, actor=actor)
    elif action == "archive":
        if memory.status in (Status.ARCHIVED, Status.DELETED):
            return False
        lifecycle.memory_archive(memory=memory, actor=actor)
    elif action == "delete":
        if memory.status == Status.DELETED:
            return False
        lifecycle.memory_delete(memory=memory, actor=actor)
    else:
        services.memory_edit(memory=memory, changes={"category": category}, actor=actor, reason="bulk change")
    return True


def _refused(request: HttpRequest, access: Access, text: str, *, back: str) -> HttpResponse:
    """A refused bulk action changes nothing. htmx gets the rows region back, unchanged and
    with the message, so the table (the swap target of filters and pages) is never replaced."""
    if not is_htmx(request):
        return refuse(request, text, back=back, status=422)
    context = list_context(request, access, QueryDict(query_of(back)))
    return render(request, f"{TEMPLATE}#rows", {**context, "error": text}, status=422)


@project_view(Role.REVIEWER)
@require_POST
def memory_bulk(request: HttpRequest, access: Access) -> HttpResponse:
    """Approve, archive, delete or re-categorise the ticked memories, then show the list again."""
    back = next_url(request, reverse("ui:list", args=[access.project.slug]))
    form = BulkForm(request.POST, project=access.project)
    if not form.is_valid():
        text = "Choose the new category." if "category" in form.errors else "Choose an action."
        return _refused(request, access, text, back=back)
    memories = ui_selectors.memories_by_ids(project=access.project, ids=request.POST.getlist("ids"))
    if not memories:
        return _refused(request, access, "Tick at least one memory.", back=back)
    changed = 0
    try:
        for memory in memories:
            changed += _apply(access, memory, form.cleaned_data["action"], form.cleaned_data["category"])
    except DomainError as error:
        return refuse(request, error, back=back)
    text = f"{form.cleaned_data['action'].capitalize()}: {changed} of {len(memories)} memories changed."
    if not is_htmx(request):
        return done(request, text, back=back)
    context = list_context(request, access, QueryDict(query_of(back)))
    return render(request, f"{TEMPLATE}#rows", {**context, "notice": text})
