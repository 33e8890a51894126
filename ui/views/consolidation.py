"""Consolidation in the curation UI (docs/adr/0093-consolidation.md): start a run for an end user,
follow it, undo what it applied; and, in the review queue, the merges and supersedes it proposed,
each with the diff of what it changes, approved or rejected one by one or in bulk, with undo."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from common.errors import DomainError, NotFound
from consolidation import selectors, services
from consolidation.models import ActionKind, ConsolidationAction
from memories.models import Role
from ui.views.access import Access, done, is_htmx, next_url, page_context, project_view, refuse
from ui.views.diffing import Segment, word_diff
from ui.views.review_undo import remember, undo_label

RUNS_SHOWN = 50


@dataclass(frozen=True)
class ProposalItem:
    """A proposed merge or supersede as a review card shows it."""

    action: ConsolidationAction
    diff: list[Segment]
    what: str


def proposal_item(action: ConsolidationAction) -> ProposalItem:
    """The card: what the retired memory becomes and the word diff from it to the survivor."""
    if action.kind == ActionKind.MERGE:
        what = "Merge: the older wording is superseded by the one that stays (reason: merged); nothing is deleted."
    else:
        what = "Supersede: the newer memory becomes the current version; the older one stays in its history."
    return ProposalItem(action=action, diff=word_diff(action.retired.content, action.survivor.content), what=what)


def proposal_items(access: Access, *, user_id: str = "") -> list[ProposalItem]:
    return [proposal_item(a) for a in selectors.proposals(project=access.project, user_id=user_id)]


def _review_answer(request: HttpRequest, access: Access, text: str) -> HttpResponse:
    back = reverse("ui:review", args=[access.project.slug])
    if not is_htmx(request):
        return done(request, text, back=back)
    context = page_context(
        access,
        consolidation_total=selectors.proposals_count(project=access.project),
        notice=text,
        undo=undo_label(request, access),
    )
    return render(request, "ui/review.html#after_consolidation", context)


@project_view(Role.REVIEWER)
@require_POST
def review_approve(request: HttpRequest, access: Access, action_id: int) -> HttpResponse:
    """Apply a proposed merge or supersede."""
    return _decide(request, access, action_id, services.action_approve, "Approved")


@project_view(Role.REVIEWER)
@require_POST
def review_reject(request: HttpRequest, access: Access, action_id: int) -> HttpResponse:
    """Reject a proposal: nothing changes and the pair is not proposed again."""
    return _decide(request, access, action_id, services.action_reject, "Rejected")


def _decide(
    request: HttpRequest, access: Access, action_id: int, decide: Callable[..., object], verb: str
) -> HttpResponse:
    action = _action(access, action_id)
    try:
        decide(action=action, actor=access.actor)
    except DomainError as error:
        return refuse(request, error, back=reverse("ui:review", args=[access.project.slug]))
    label = f"{verb} the {action.kind}."
    remember(request, access, label, [{"op": "consolidation", "id": str(action.pk)}])
    return _review_answer(request, access, label)


@project_view(Role.REVIEWER)
@require_POST
def review_bulk(request: HttpRequest, access: Access) -> HttpResponse:
    """Approve or reject every ticked proposal still waiting."""
    back = reverse("ui:review", args=[access.project.slug])
    decision = request.POST.get("action")
    if decision not in ("approve", "reject"):
        return refuse(request, "Choose approve or reject.", back=back, status=422)
    actions = selectors.actions_by_id(project=access.project, ids=request.POST.getlist("ids"))
    steps, changed = [], 0
    for action in actions:
        try:
            if decision == "approve":
                services.action_approve(action=action, actor=access.actor)
            else:
                services.action_reject(action=action, actor=access.actor)
        except DomainError:
            continue
        changed += 1
        steps.append({"op": "consolidation", "id": str(action.pk)})
    text = f"{'Approved' if decision == 'approve' else 'Rejected'} {changed} of {len(actions)} consolidation proposals."
    if skipped := len(actions) - changed:
        text += f" {skipped} could not be: decided already, or their memories changed since."
    remember(request, access, text, steps)
    if not is_htmx(request):
        return done(request, text, back=back)
    context = page_context(
        access,
        consolidations=proposal_items(access, user_id=request.POST.get("user", "").strip()),
        consolidation_total=selectors.proposals_count(project=access.project),
        consolidation_notice=text,
        undo=undo_label(request, access),
        oob=True,
    )
    return render(request, "ui/review.html#consolidations", context)


# --- runs -------------------------------------------------------------------------------------------


@project_view(write=Role.REVIEWER)
def runs(request: HttpRequest, access: Access) -> HttpResponse:
    """Recent consolidations, and (POST) a new one for an end user."""
    back = reverse("ui:consolidations", args=[access.project.slug])
    if request.method == "POST":
        user_id = request.POST.get("user_id", "").strip()
        if not user_id or len(user_id) > 255:
            return refuse(request, "Name the end user whose memories to consolidate.", back=next_url(request, back))
        run = services.consolidation_submit(project=access.project, user_id=user_id, trigger="ui", actor=access.actor)
        return HttpResponseRedirect(reverse("ui:consolidation", args=[access.project.slug, run.pk]))
    user_id = request.GET.get("user", "").strip()
    context = page_context(
        access,
        runs=selectors.runs_for_project(project=access.project, user_id=user_id, limit=RUNS_SHOWN),
        user_filter=user_id,
        waiting=selectors.proposals_count(project=access.project),
        nav="review",
    )
    return render(request, "ui/consolidations.html", context)


def _action(access: Access, action_id: int) -> ConsolidationAction:
    try:
        return selectors.action_get(project=access.project, action_id=action_id)
    except NotFound as error:
        raise Http404(error.message) from error


def _run_context(access: Access, run_id: str) -> dict[str, Any]:
    try:
        run = selectors.run_get(project=access.project, run_id=run_id)
    except NotFound as error:
        raise Http404(error.message) from error
    return page_context(access, run=run, actions=selectors.run_actions(run=run), nav="review")


@project_view()
def run_page(request: HttpRequest, access: Access, run_id: str) -> HttpResponse:
    """One consolidation: status (refreshing while it runs), counts, and each merge or supersede."""
    template = "ui/consolidation.html#run" if is_htmx(request) else "ui/consolidation.html"
    return render(request, template, _run_context(access, run_id))


@project_view(Role.REVIEWER)
@require_POST
def action_undo(request: HttpRequest, access: Access, action_id: int) -> HttpResponse:
    """Take back an applied merge or supersede: the retired memory is current again."""
    action = _action(access, action_id)
    back = reverse("ui:consolidation", args=[access.project.slug, action.run_id])
    try:
        services.action_undo(action=action, actor=access.actor)
    except DomainError as error:
        return refuse(request, error, back=back)
    return done(request, f"Undone: the {action.kind} of “{action.retired.content[:60]}”.", back=back)
