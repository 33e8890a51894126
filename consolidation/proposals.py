"""How the review queue decides a proposal (``models.Proposal``): a merge, a supersede or an
observation is approved, rejected or reopened the same way; only what applying it writes differs."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.utils import timezone

from common.errors import Conflict
from consolidation.models import ActionStatus, Proposal


def decide(proposal: Proposal, *, status: str, actor: str, note: str = "", also: Sequence[str] = ()) -> None:
    """Record ``status``, who decided and when (and ``also``, fields the decision filled in)."""
    proposal.status, proposal.decided_by, proposal.decided_at, proposal.note = status, actor, timezone.now(), note
    proposal.save(update_fields=["status", *also, "decided_by", "decided_at", "note"])


def approve(
    proposal: Proposal, apply: Callable[[], str], *, actor: str, changed: str, also: Sequence[str] = ()
) -> None:
    """Apply a waiting proposal with ``apply``, which answers why it could not ("" when it did).
    Conflict when it is no longer proposed, or when ``changed`` (what it rests on) changed since
    (it is then marked stale and leaves the queue)."""
    _waiting(proposal)
    note = apply()
    decide(proposal, status=ActionStatus.STALE if note else ActionStatus.APPLIED, actor=actor, note=note, also=also)
    if note:
        raise Conflict(f"{changed} changed since the proposal: {note}", code="proposal_stale")


def reject(proposal: Proposal, *, actor: str) -> None:
    """Reject a waiting proposal: nothing changes, and it is not proposed again."""
    _waiting(proposal)
    decide(proposal, status=ActionStatus.REJECTED, actor=actor)


def _waiting(proposal: Proposal) -> None:
    if proposal.status != ActionStatus.PROPOSED:
        raise Conflict("this proposal has already been decided", code="not_proposed")
