"""The retrieval playground: run the real retrieve pipeline for one end user and show why
each memory was (or was not) injected — every candidate's signals, its calibrated score,
the graph path that brought it in and whether it made the token budget.

It calls :func:`retrieval.engine.retrieve` like the API does (same rate limit, same
retrieval log), with no ``turn_id`` so nothing is cached.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from django import forms
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from memories.models import Memory, Project
from retrieval.engine import default_min_score, retrieve
from retrieval.llm import llm_configured
from retrieval.ranking.relevance import Evidence
from retrieval.ranking.search import Candidate
from retrieval.shapes import RetrieveRequest, RetrieveResult, Trace
from ui import selectors as ui_selectors
from ui.views.access import Access, is_htmx, page_context, project_view

TEMPLATE = "ui/playground.html"
ROLE_LINE = re.compile(r"^\s*(user|assistant)\s*:\s?(.*)$", re.IGNORECASE)
HYDE_CHOICES = [("", "Project default"), ("on", "On"), ("off", "Off")]


class PlaygroundForm(forms.Form):
    """The playground's inputs, read from the query string (the form is a GET form)."""

    user = forms.CharField(
        max_length=255, label="End user", widget=forms.TextInput(attrs={"list": "end-users", "autocomplete": "off"})
    )
    text = forms.CharField(
        max_length=32_000,
        label="Question or conversation",
        widget=forms.Textarea(attrs={"rows": 4, "aria-describedby": "text-help"}),
    )
    hyde = forms.ChoiceField(required=False, choices=HYDE_CHOICES, label="HyDE")
    token_budget = forms.IntegerField(required=False, min_value=0, max_value=100_000, label="Token budget")
    min_score = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="Minimum score",
        widget=forms.NumberInput(attrs={"step": "0.01"}),
    )
    hop_depth = forms.IntegerField(required=False, min_value=0, max_value=3, label="Graph hops")
    limit = forms.IntegerField(required=False, min_value=1, max_value=100, label="Limit")

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Blank options fall back to the project's settings; the placeholders say what those are.
        defaults = {
            "token_budget": project.token_budget,
            "min_score": default_min_score(project.min_score),
            "hop_depth": 1,
            "limit": 10,
        }
        for name, value in defaults.items():
            self.fields[name].widget.attrs["placeholder"] = str(value)
        runs = project.hyde_enabled and llm_configured()
        default_hyde = f"Project default ({'on' if runs else 'off'}{'' if llm_configured() else ': no LLM'})"
        hyde = self.fields["hyde"]
        assert isinstance(hyde, forms.ChoiceField)
        hyde.choices = [("", default_hyde), *HYDE_CHOICES[1:]]

    def retrieve_request(self) -> RetrieveRequest:
        """The engine's request for the (valid) form: a conversation when lines carry roles."""
        data = self.cleaned_data
        messages = parse_conversation(data["text"])
        return RetrieveRequest(
            user_id=data["user"],
            query=None if messages else data["text"],
            messages=messages or None,
            turn_id=None,
            hyde={"on": True, "off": False}.get(data["hyde"]),
            token_budget=data["token_budget"],
            min_score=data["min_score"],
            hop_depth=1 if data["hop_depth"] is None else data["hop_depth"],
            limit=data["limit"] or 10,
            rate_limited=False,
            logged=False,
        )


def parse_conversation(text: str) -> list[dict[str, str]]:
    """Lines starting ``user:`` or ``assistant:`` open a message; other lines continue it.

    Text without any such line is a plain question: the empty list.
    """
    messages: list[dict[str, str]] = []
    for line in text.splitlines():
        if match := ROLE_LINE.match(line):
            messages.append({"role": match[1].lower(), "content": match[2]})
        elif messages:
            messages[-1]["content"] += "\n" + line
    return [{**m, "content": m["content"].strip()} for m in messages]


@dataclass(frozen=True)
class Row:
    """One memory the pipeline considered, with every signal and what became of it."""

    memory: Memory
    candidate: Candidate | None
    score: float | None
    passed: bool | None  # None: not a search candidate, only reached through the graph
    via: Memory | None
    relationship: str
    outcome: str
    evidence: Evidence | None = None

    @property
    def outcome_label(self) -> str:
        return OUTCOME_LABELS[self.outcome]


OUTCOME_LABELS = {
    "included": "Included",
    "budget": "Excluded by budget",
    "below": "Below the cut",
    "unanswering": "Holds no answer of the asked kind",
    "limit": "Beyond the limit",
}


def explain(
    *, project: Project, request: RetrieveRequest, trace: Trace, body: RetrieveResult
) -> tuple[list[Row], float]:
    """Rows for every candidate and graph neighbour, best first, and the min_score used.

    The memories are loaded in one query whatever the number of candidates.
    """
    # The cut the engine applied: min_score, or margin × the best score when that is higher
    # (the hand-set model's min_score when the embedder was down).
    threshold = trace.cut if trace.cut is not None else default_min_score()
    candidates = {c.memory_id: c for c in trace.candidates}
    paths = trace.graph_paths
    ids = [*candidates, *(i for i in paths if i not in candidates)]
    memories = {str(m.pk): m for m in Memory.objects.filter(project=project, pk__in=ids)}
    body_scores = {str(hit.memory.pk): hit.score for hit in body.memories}
    excluded = set(trace.excluded_ids)
    unanswering = set(trace.unanswering)
    rows = []
    for memory_id in ids:
        memory = memories.get(memory_id)
        if memory is None:
            continue
        score = trace.scores.get(memory_id, body_scores.get(memory_id))
        passed = None if memory_id not in candidates else trace.scores.get(memory_id, 0.0) >= threshold
        if memory_id in body_scores:
            outcome = "included"
        elif memory_id in excluded:
            outcome = "budget"
        elif passed is False:
            outcome = "below"
        elif memory_id in unanswering:
            outcome = "unanswering"
        else:
            outcome = "limit"
        parent, relationship = paths.get(memory_id, ("", ""))
        row = Row(memory, candidates.get(memory_id), score, passed, memories.get(parent), relationship, outcome)
        rows.append(replace(row, evidence=trace.evidence.get(memory_id)))
    rows.sort(key=lambda row: -(row.score if row.score is not None else -1.0))
    return rows, threshold


def run(project: Project, form: PlaygroundForm) -> dict[str, Any]:
    """Retrieve for the form's inputs; what the results region shows."""
    request = form.retrieve_request()
    trace = Trace()
    body = retrieve(project=project, request=request, trace=trace)
    rows, threshold = explain(project=project, request=request, trace=trace, body=body)
    return {
        "body": body,
        "trace": trace,
        "rows": rows,
        "threshold": threshold,
        "conversation": request.messages or [],
        "budget": project.token_budget if request.token_budget is None else request.token_budget,
    }


@project_view()
def playground(request: HttpRequest, access: Access) -> HttpResponse:
    """Ask as an end user and see every stage of the retrieval; htmx gets only the results."""
    submitted = "user" in request.GET or "text" in request.GET
    form = PlaygroundForm(request.GET if submitted else None, project=access.project)
    results = run(access.project, form) if submitted and form.is_valid() else None
    context = page_context(
        access,
        form=form,
        results=results,
        submitted=submitted,
        llm=llm_configured(),
        end_users=ui_selectors.end_users(project=access.project),
        nav="playground",
    )
    status = 422 if submitted and not form.is_valid() else 200
    template = f"{TEMPLATE}#results" if is_htmx(request) else TEMPLATE
    return render(request, template, context, status=status)
