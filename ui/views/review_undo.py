"""Undo of the review queue's last action (docs/adr/0049-review-queue-collisions-merge-undo.md).

The last action of a reviewer on a project is held in their session as a list of steps,
each naming what to reverse (a memory's approval, rejection or merge, or a consolidation
proposal's or observation's approval or rejection). Undo runs the reversing service for every step and writes new
revisions ("unapprove", "restore", "edit"): history keeps both the action and its undo.
A step whose memory has changed since (someone else acted on it) is refused by the service
and reported, never forced.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from common.errors import Conflict, DomainError
from consolidation import observations
from consolidation import selectors as consolidation_selectors
from consolidation import services as consolidation_services
from memories import lifecycle, review
from ui import selectors as ui_selectors
from ui.views.access import Access


def _key(access: Access) -> str:
    return f"review-undo:{access.project.pk}"


def remember(request: HttpRequest, access: Access, label: str, steps: list[dict[str, str]]) -> None:
    """Hold ``steps`` as the one action undo reverses (replacing the previous one)."""
    if steps:
        request.session[_key(access)] = {"label": label, "steps": steps}
    else:
        request.session.pop(_key(access), None)


def undo_label(request: HttpRequest, access: Access) -> str:
    """What undo would reverse, or "" when there is nothing to undo."""
    held = request.session.get(_key(access))
    return str(held["label"]) if isinstance(held, dict) and held.get("steps") else ""


def _reverse(access: Access, step: dict[str, Any], reason: str) -> None:
    if step.get("op") == "consolidation":
        # A consolidation proposal approved (its memories changed back) or rejected: waiting again.
        action = consolidation_selectors.action_get(project=access.project, action_id=step.get("id", ""))
        consolidation_services.action_undo(action=action, actor=access.actor, reopen=True)
        return
    if step.get("op") == "observation":
        # An observation approved (its memory deleted again) or rejected: waiting again.
        observation = consolidation_selectors.observation_get(project=access.project, observation_id=step.get("id", ""))
        observations.observation_undo(observation=observation, actor=access.actor, reopen=True)
        return
    found = ui_selectors.memories_by_ids(project=access.project, ids=[step.get("id", ""), step.get("into", "")])
    by_id = {str(m.pk): m for m in found}
    memory = by_id.get(str(step.get("id")))
    if memory is None:
        raise DomainError("the memory is gone")
    actor = access.actor
    if step["op"] == "approve":
        review.memory_return_to_review(memory=memory, actor=actor, reason=reason)
    elif step["op"] == "reject":
        lifecycle.memory_restore(memory=memory, actor=actor, reason=reason)
    elif step["op"] == "merge" and str(step.get("into")) in by_id:
        target = by_id[str(step["into"])]
        review.memory_unmerge(
            memory=memory, target=target, merged=step["merged"], content=step["before"], actor=actor, reason=reason
        )
    else:
        raise DomainError("this action cannot be undone")


def undo_last(request: HttpRequest, access: Access) -> str:
    """Reverse the held action once (it is forgotten whatever happens) and say what happened."""
    held = request.session.pop(_key(access), None)
    if not isinstance(held, dict) or not held.get("steps"):
        raise Conflict("There is nothing to undo.", code="nothing_to_undo")
    reason = f"undo in review: {held['label']}"
    failed = 0
    for step in held["steps"]:
        try:
            _reverse(access, step, reason)
        except DomainError:
            failed += 1
    text = f"Undone: {held['label']}"
    if failed:
        text += f" ({failed} could not be undone: changed since.)"
    return text
