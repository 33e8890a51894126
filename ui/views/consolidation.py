"""Consolidation in the curation UI (docs/adr/0093-consolidation.md): start a run for an end user,
follow it, undo what it applied; and, in the review queue, what it proposed: merges and supersedes,
each with the diff of what it changes, and observations (docs/adr/0110-consolidation-observations.md),
each with the memories it cites; approved or rejected one by one or in bulk, with undo."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from common.errors import DomainError
from consolidation import observations, selectors, services
from consolidation.models import ActionKind, ConsolidationAction, ConsolidationObservation
from memories.models import Memory, Role
from ui.views.access import Access, done, is_htmx, next_url, page_context, project_view, refuse
from ui.views.diffing import Segment, word_diff
from ui.views.review_undo import remember, undo_label

RUNS_SHOWN = 50
# A bulk form ticks merges and observations alike; an observation's box says which it is.
OBSERVATION_TICK = "observation-"


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


@dataclass(frozen=True)
class ObservationItem:
    """An observation as a review card or a run's row shows it: the statement and the memories it
    cites, in the order they are stored (a cited memory deleted for good since is left out)."""

    observation: ConsolidationObservation
    cited: list[Memory]


def observation_items(access: Access, found: list[ConsolidationObservation]) -> list[ObservationItem]:
    memories = selectors.cited_memories(project=access.project, observations=found)
    return [ObservationItem(observation=o, cited=[memories[i] for i in o.cited if i in memories]) for o in found]


def waiting_observations(access: Access, *, user_id: str = "") -> list[ObservationItem]:
    return observation_items(access, selectors.observation_proposals(project=access.project, user_id=user_id))


def waiting_total(access: Access) -> int:
    """Everything consolidation left for review: merges, supersedes and observations."""
    project = access.project
    return selectors.proposals_count(project=project) + selectors.observation_proposals_count(project=project)


def _review_answer(request: HttpRequest, access: Access, text: str) -> HttpResponse:
    back = reverse("ui:review", args=[access.project.slug])
    if not is_htmx(request):
        return done(request, text, back=back)
    context = page_context(
        access,
        consolidation_total=waiting_total(access),
        notice=text,
        undo=undo_label(request, access),
    )
    return render(request, "ui/review.html#after_consolidation", context)


def _refused(request: HttpRequest, access: Access, error: DomainError, card: str) -> HttpResponse:
    """A decision refused. A stale proposal has left the queue (its memories changed since): htmx
    is told which card to mark, as the 409 is not swapped into the page."""
    back = reverse("ui:review", args=[access.project.slug])
    if error.code != "proposal_stale":
        return refuse(request, error, back=back)
    text = f"Not applied: {error.message}. The proposal is stale and has left the review queue."
    response = refuse(request, text, back=back, status=error.status)
    if is_htmx(request):
        stale = {"card": card, "message": text, "count": waiting_total(access)}
        response["HX-Trigger"] = json.dumps({"proposal-stale": stale})
    return response


@project_view(Role.REVIEWER)
@require_POST
def review_approve(request: HttpRequest, access: Access, action_id: int) -> HttpResponse:
    """Apply a proposed merge or supersede."""
    action = selectors.action_get(project=access.project, action_id=action_id)
    return _decided(request, access, lambda: services.action_approve(action=action, actor=access.actor),
                    card=f"proposal-{action.pk}", label=f"Approved the {action.kind}.", op="consolidation",
                    target=action.pk)  # fmt: skip


@project_view(Role.REVIEWER)
@require_POST
def review_reject(request: HttpRequest, access: Access, action_id: int) -> HttpResponse:
    """Reject a proposal: nothing changes and the pair is not proposed again."""
    action = selectors.action_get(project=access.project, action_id=action_id)
    return _decided(request, access, lambda: services.action_reject(action=action, actor=access.actor),
                    card=f"proposal-{action.pk}", label=f"Rejected the {action.kind}.", op="consolidation",
                    target=action.pk)  # fmt: skip


@project_view(Role.REVIEWER)
@require_POST
def review_observation_approve(request: HttpRequest, access: Access, observation_id: int) -> HttpResponse:
    """Write a proposed observation as a memory linked to what it cites."""
    found = selectors.observation_get(project=access.project, observation_id=observation_id)
    return _decided(request, access, lambda: observations.observation_approve(observation=found, actor=access.actor),
                    card=f"observation-{found.pk}", label=f"Approved the observation “{found.content[:60]}”.",
                    op="observation", target=found.pk)  # fmt: skip


@project_view(Role.REVIEWER)
@require_POST
def review_observation_reject(request: HttpRequest, access: Access, observation_id: int) -> HttpResponse:
    """Reject an observation: nothing is written and the same memories are not observed again."""
    found = selectors.observation_get(project=access.project, observation_id=observation_id)
    return _decided(request, access, lambda: observations.observation_reject(observation=found, actor=access.actor),
                    card=f"observation-{found.pk}", label=f"Rejected the observation “{found.content[:60]}”.",
                    op="observation", target=found.pk)  # fmt: skip


def _decided(
    request: HttpRequest, access: Access, decide: Callable[[], object], *, card: str, label: str, op: str, target: int
) -> HttpResponse:
    """One review decision: made (remembered for the queue's undo) or refused."""
    try:
        decide()
    except DomainError as error:
        return _refused(request, access, error, card)
    remember(request, access, label, [{"op": op, "id": str(target)}])
    return _review_answer(request, access, label)


@project_view(Role.REVIEWER)
@require_POST
def review_bulk(request: HttpRequest, access: Access) -> HttpResponse:
    """Approve or reject every ticked proposal still waiting, merges and observations alike."""
    back = reverse("ui:review", args=[access.project.slug])
    decision = request.POST.get("action")
    if decision not in ("approve", "reject"):
        return refuse(request, "Choose approve or reject.", back=back, status=422)
    ticked = request.POST.getlist("ids")
    actions = selectors.actions_by_id(project=access.project, ids=ticked)
    observed = [tick.removeprefix(OBSERVATION_TICK) for tick in ticked if tick.startswith(OBSERVATION_TICK)]
    found = selectors.observations_by_id(project=access.project, ids=observed)
    steps: list[dict[str, str]] = []
    for action in actions:
        decide = services.action_approve if decision == "approve" else services.action_reject
        if _applied(decide, action=action, actor=access.actor):
            steps.append({"op": "consolidation", "id": str(action.pk)})
    for observation in found:
        judge = observations.observation_approve if decision == "approve" else observations.observation_reject
        if _applied(judge, observation=observation, actor=access.actor):
            steps.append({"op": "observation", "id": str(observation.pk)})
    asked, changed = len(actions) + len(found), len(steps)
    text = f"{'Approved' if decision == 'approve' else 'Rejected'} {changed} of {asked} consolidation proposals."
    if skipped := asked - changed:
        text += f" {skipped} could not be: decided already, or their memories changed since."
    remember(request, access, text, steps)
    if not is_htmx(request):
        return done(request, text, back=back)
    user_id = request.POST.get("user", "").strip()
    context = page_context(
        access,
        consolidations=proposal_items(access, user_id=user_id),
        observations=waiting_observations(access, user_id=user_id),
        consolidation_total=waiting_total(access),
        consolidation_notice=text,
        undo=undo_label(request, access),
        oob=True,
    )
    return render(request, "ui/review.html#consolidations", context)


def _applied(decide: Callable[..., object], **arguments: Any) -> bool:
    """Whether one decision of a bulk went through; a refused one (decided already, stale) is
    counted as skipped, not raised: the others still apply."""
    try:
        decide(**arguments)
    except DomainError:
        return False
    return True


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
        waiting=waiting_total(access),
        nav="review",
    )
    return render(request, "ui/consolidations.html", context)


@project_view()
def run_page(request: HttpRequest, access: Access, run_id: str) -> HttpResponse:
    """One consolidation: status (refreshing while it runs), counts, each merge or supersede and
    each observation."""
    run = selectors.run_get(project=access.project, run_id=run_id)
    context = page_context(
        access,
        run=run,
        actions=selectors.run_actions(run=run),
        observations=observation_items(access, selectors.run_observations(run=run)),
        nav="review",
    )
    return render(request, "ui/consolidation.html#run" if is_htmx(request) else "ui/consolidation.html", context)


@project_view(Role.REVIEWER)
@require_POST
def action_undo(request: HttpRequest, access: Access, action_id: int) -> HttpResponse:
    """Take back an applied merge or supersede: the retired memory is current again."""
    action = selectors.action_get(project=access.project, action_id=action_id)
    back = reverse("ui:consolidation", args=[access.project.slug, action.run_id])
    try:
        services.action_undo(action=action, actor=access.actor)
    except DomainError as error:
        return refuse(request, error, back=back)
    return done(request, f"Undone: the {action.kind} of “{action.retired.content[:60]}”.", back=back)


@project_view(Role.REVIEWER)
@require_POST
def observation_undo(request: HttpRequest, access: Access, observation_id: int) -> HttpResponse:
    """Take back an applied observation: its memory is deleted (softly) and the same memories are
    not observed again."""
    observation = selectors.observation_get(project=access.project, observation_id=observation_id)
    back = reverse("ui:consolidation", args=[access.project.slug, observation.run_id])
    try:
        observations.observation_undo(observation=observation, actor=access.actor)
    except DomainError as error:
        return refuse(request, error, back=back)
    return done(request, f"Undone: the observation “{observation.content[:60]}”.", back=back)
