"""Operations pages: the project dashboard, capture jobs (with retry and a page each) and the
retrieval log."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST

from capture import selectors as capture_selectors
from capture import services as capture_services
from capture.models import CaptureJob, JobStatus
from common.errors import DomainError
from memories.models import Memory, Role
from ui import eval_reports, page_selectors
from ui import selectors as ui_selectors
from ui.views.access import Access, done, is_htmx, next_url, page_context, project_view, refuse

PAGE_SIZE = 50
CHART_POINTS = 200


@project_view()
def dashboard(request: HttpRequest, access: Access) -> HttpResponse:
    """Counts by status and category, captures and retrievals per day, retrieval latency."""
    stats = ui_selectors.dashboard(project=access.project)
    return render(request, "ui/dashboard.html", page_context(access, stats=stats, nav="dashboard"))


@project_view()
def capture_jobs(request: HttpRequest, access: Access) -> HttpResponse:
    """Capture jobs newest first, filterable by status; failed ones can be retried."""
    status = request.GET.get("status", "")
    status = status if status in JobStatus.values else ""
    queryset = ui_selectors.capture_jobs(project=access.project, status=status)
    page = Paginator(queryset, PAGE_SIZE).get_page(request.GET.get("page"))
    context = page_context(access, page=page, status=status, statuses=JobStatus.choices, nav="captures")
    template = "ui/captures.html#jobs" if is_htmx(request) else "ui/captures.html"
    return render(request, template, context)


# What a proposal's outcome means, in the words of the job page.
OUTCOMES = {
    "created": "written",
    "duplicate": "not written: duplicate",
    "near_duplicate": "not written: near-duplicate",
    "failed": "not written: refused",
    "pending": "not written yet",
}


def _proposal_rows(job: CaptureJob, memories: dict[str, Memory]) -> list[dict[str, object]]:
    """Each stored proposal with its outcome in words and the memory it wrote or collided with."""
    rows = []
    for item in job.proposals if isinstance(job.proposals, list) else []:
        if not isinstance(item, dict):
            continue
        outcome = str(item.get("outcome") or "pending")
        rows.append(
            {
                **item,
                "outcome": outcome,
                "outcome_label": OUTCOMES.get(outcome, outcome),
                "memory": memories.get(str(item.get("memory_id"))),
            }
        )
    return rows


@project_view()
def capture_job(request: HttpRequest, access: Access, job_id: str) -> HttpResponse:
    """One capture job: its (redacted) source messages, each proposal with its outcome and the
    reason it was not written, the items validation rejected, and links to the memories."""
    job = capture_selectors.capture_job_get(project=access.project, job_id=job_id)
    proposals = job.proposals if isinstance(job.proposals, list) else []
    ids = [str(p.get("memory_id")) for p in proposals if isinstance(p, dict) and p.get("memory_id")]
    memories = {str(m.pk): m for m in ui_selectors.memories_by_ids(project=access.project, ids=ids)}
    payload = job.payload if isinstance(job.payload, dict) else {}
    rejected = [r for r in payload.get("rejected") or [] if isinstance(r, dict)]
    # Not "messages": the base template loops over that name for Django's notices.
    source_messages = [m for m in job.window if isinstance(m, dict)] if isinstance(job.window, list) else []
    context = page_context(
        access,
        job=job,
        source_messages=source_messages,
        proposals=_proposal_rows(job, memories),
        rejected=rejected,
        extractor=str(payload.get("extractor") or ""),
        here=reverse("ui:capture_job", args=[access.project.slug, job.pk]),
        nav="captures",
    )
    return render(request, "ui/capture_job.html", context)


@project_view(Role.REVIEWER)
@require_POST
def capture_retry(request: HttpRequest, access: Access, job_id: str) -> HttpResponse:
    """Put a failed job back in the queue."""
    job = capture_selectors.capture_job_get(project=access.project, job_id=job_id)
    back = next_url(request, reverse("ui:captures", args=[access.project.slug]))
    try:
        job = capture_services.capture_job_retry(job=job)
    except DomainError as error:
        return refuse(request, error, back=back)
    if not is_htmx(request):
        return done(request, "Queued again.", back=back)
    return render(request, "ui/captures.html#job", page_context(access, job=job, here=back))


@project_view()
def retrieval_log(request: HttpRequest, access: Access) -> HttpResponse:
    """Recent retrieve calls with their latency, and a chart of the latest ones."""
    queryset = ui_selectors.retrieval_logs(project=access.project)
    page = Paginator(queryset, PAGE_SIZE).get_page(request.GET.get("page"))
    if is_htmx(request):
        return render(request, "ui/retrievals.html#logs", page_context(access, page=page))
    recent, latency = ui_selectors.recent_latency(project=access.project, count=CHART_POINTS)
    context = page_context(access, page=page, recent=recent, latency=latency, nav="retrievals")
    return render(request, "ui/retrievals.html", context)


@project_view()
def retrieval_detail(request: HttpRequest, access: Access, log_id: int) -> HttpResponse:
    """One retrieve call: its timings and the memories it returned, with their scores."""
    log = page_selectors.retrieval_log_get(project=access.project, log_id=log_id)
    returned = page_selectors.retrieval_returned(project=access.project, log=log)
    stages = sorted(((k, v) for k, v in (log.timings or {}).items() if k != "total"), key=lambda kv: -float(kv[1]))
    context = page_context(access, log=log, returned=returned, stages=stages, nav="retrievals")
    return render(request, "ui/retrieval.html", context)


@project_view()
def evaluation(request: HttpRequest, access: Access) -> HttpResponse:
    """The latest eval_retrieval and eval_capture runs with their figures."""
    found = eval_reports.latest_reports(directory=Path(settings.MEMORYHUB_REPORTS_DIR))
    context = page_context(
        access,
        retrieval=[r for r in found if r.kind == "retrieval"],
        capture=[r for r in found if r.kind == "capture"],
        unreadable=[r for r in found if r.kind == "unknown"],
        directory=settings.MEMORYHUB_REPORTS_DIR,
        nav="evaluation",
    )
    return render(request, "ui/evaluation.html", context)
