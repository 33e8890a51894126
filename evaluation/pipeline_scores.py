"""Scoring the end-to-end evaluation's answers (``evaluation.pipeline`` plans and runs it): per
question, whether the top 5 and 10 items hold a turn that states the answer (``evidence@k``), the
share of the answer's words they contain, whether an alias of the answer is among the top 5, whether
a stale value comes first after a change of mind, and whether an unanswerable question is answered
with nothing; then the means per group and per type, the report and its table.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

from evaluation.natural import any_alias_in
from evaluation.pipeline import Item, JobRecord, Plan, Question, content_words

KS = (5, 10)


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))], 3)


def score_question(result: dict[str, Any]) -> dict[str, Any]:
    question: Question = result["question"]
    items: list[Item] = result["items"]
    row: dict[str, Any] = {"id": question.id, "group": question.group, "type": question.type, "returned": len(items)}
    # An item traced only to turns of another person or conversation: another tenant's memory
    # reached this user (only possible with --shared-project, through project-scope memories).
    row["foreign"] = sum(
        1 for item in items if item.turns and all(t.split(":")[0] != question.tenant for t in item.turns if t)
    )
    if question.type == "unanswerable":
        row["answered_empty"] = not items
        return row
    for k in KS:
        top = items[:k]
        row[f"evidence@{k}"] = any(item.turns & question.evidence for item in top)
        words = set(content_words(question.answer_text))
        text = " ".join(content_words(" ".join(item.text for item in top)))
        found = {w for w in words if re.search(r"(?<![a-z0-9])" + re.escape(w), text)}
        row[f"answer_words@{k}"] = len(found) / len(words) if words else None
    if question.answers:
        row["answered@5"] = any(any_alias_in(question.answers, item.text) for item in items[:5])
        # What the agent is handed: the profile heads every injection, then the items.
        row["answered@5+profile"] = row["answered@5"] or any_alias_in(question.answers, result.get("profile", ""))
    if question.type == "change":
        first = items[0].text if items else ""
        row["stale_first"] = (
            bool(first) and any_alias_in(question.stale, first) and not any_alias_in(question.answers, first)
        )
    return row


def details(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per question: its scores and the top 5 items (text, kind, score, turns), to read failures."""
    out = []
    for result in results:
        question: Question = result["question"]
        top = [
            {"kind": i.kind, "score": round(i.score, 4), "text": i.text, "turns": sorted(i.turns)}
            for i in result["items"][:5]
        ]
        out.append(
            {**score_question(result), "query": question.query, "evidence": sorted(question.evidence), "top": top}
        )
    return out


def _mean(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return round(sum(values) / len(values), 3) if values else None


def aggregate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    answerable = [r for r in rows if r["type"] != "unanswerable"]
    empty = [r for r in rows if r["type"] == "unanswerable"]
    change = [r for r in rows if r["type"] == "change"]
    return {
        "questions": len(rows),
        "answerable": len(answerable),
        "returned_mean": round(sum(r["returned"] for r in rows) / len(rows), 2) if rows else None,
        **{f"evidence@{k}": _mean(answerable, f"evidence@{k}") for k in KS},
        **{f"answer_words@{k}": _mean(answerable, f"answer_words@{k}") for k in KS},
        "answered@5": _mean(answerable, "answered@5"),
        "answered@5+profile": _mean(answerable, "answered@5+profile"),
        "stale_first": _mean(change, "stale_first"),
        "change_questions": len(change),
        "unanswerable": len(empty),
        "unanswerable_answered_empty": _mean(empty, "answered_empty"),
    }


def summarize(
    plan: Plan, jobs: list[JobRecord], results: list[dict[str, Any]], *, extra: dict[str, Any]
) -> dict[str, Any]:
    rows = [score_question(r) for r in results]
    # A LoCoMo turn is sent twice (once to each speaker's user): the rate is per conversation turn.
    unique_turns = len({m["correlation_id"] for caps in plan.captures.values() for c in caps for m in c.messages})
    memories = len({mid for job in jobs for mid in job.memory_ids})
    latencies = results[0]["latencies"] if results else []
    by_group: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_type: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_group[row["group"]].append(row)
        by_type[row["type"]].append(row)
    seconds = [j.seconds for j in jobs if j.seconds is not None]
    run_seconds = [j.run_seconds for j in jobs if j.run_seconds is not None]
    report = {
        "dataset": plan.dataset,
        **extra,
        "users": len(plan.captures),
        "messages_sent": plan.turns,
        "turns": unique_turns,
        "capture_jobs": len(jobs),
        "capture_jobs_by_status": dict(Counter(j.status for j in jobs)),
        "memories": memories,
        "memories_per_100_turns": round(100 * memories / unique_turns, 2) if unique_turns else None,
        "capture_job_seconds": {"p50": _pct(seconds, 0.5), "p95": _pct(seconds, 0.95)},
        "capture_job_run_seconds": {"p50": _pct(run_seconds, 0.5), "p95": _pct(run_seconds, 0.95)},
        "retrieve_ms": {"n": len(latencies), "p50": _pct(latencies, 0.5), "p95": _pct(latencies, 0.95)},
        # Of the items kept (the top 10 after merging), how many were traced by word overlap.
        "approximated_provenance": sum(i.approximated for r in results for i in r["items"]),
        "foreign_items": sum(r["foreign"] for r in rows),
        "episodes_returned": sum(1 for r in results for i in r["items"] if i.kind == "episode"),
        "overall": aggregate(rows),
        "by_group": {g: aggregate(v) for g, v in sorted(by_group.items())},
        "by_type": {t: aggregate(v) for t, v in sorted(by_type.items())},
        "notes": plan.notes,
    }
    return report


def table(report: dict[str, Any]) -> str:
    columns = [
        "evidence@5",
        "evidence@10",
        "answer_words@10",
        "answered@5",
        "answered@5+profile",
        "stale_first",
        "unanswerable_answered_empty",
    ]
    short = ["ev@5", "ev@10", "words@10", "ans@5", "ans+prof", "stale1st", "unans_empty"]
    lines = [
        f"eval_pipeline {report['dataset']} ({_scope(report)}; extractor {report.get('extractor')})",
        f"  users {report['users']}  turns {report['turns']} (messages sent {report['messages_sent']})"
        f"  capture jobs {report['capture_jobs']} "
        f"{report['capture_jobs_by_status']}  memories {report['memories']} "
        f"({report['memories_per_100_turns']} per 100 turns)",
        f"  capture job s (created→finished) p50 {report['capture_job_seconds']['p50']}"
        f" p95 {report['capture_job_seconds']['p95']}; running p50 {report['capture_job_run_seconds']['p50']}"
        f" p95 {report['capture_job_run_seconds']['p95']}\n"
        f"  retrieve ms p50 {report['retrieve_ms']['p50']} p95 {report['retrieve_ms']['p95']}"
        f" (n {report['retrieve_ms']['n']})",
        f"  provenance approximated for {report['approximated_provenance']} returned memories;"
        f" episodes returned {report['episodes_returned']}; items from another person or conversation"
        f" {report['foreign_items']}",
    ]
    lines += [f"  note: {note}" for note in report["notes"]]
    header = f"  {'':18} {'n':>4} " + " ".join(f"{s:>11}" for s in short)
    for title, part in (("by group", report["by_group"]), ("by type", report["by_type"])):
        lines += [f"  {title}", header]
        for name, figures in [*part.items(), ("ALL", report["overall"])]:
            cells = " ".join(f"{_cell(figures.get(c)):>11}" for c in columns)
            lines.append(f"  {name[:18]:18} {figures['questions']:>4} {cells}")
    return "\n".join(lines)


def _scope(report: dict[str, Any]) -> str:
    if report["dataset"] == "natural":
        return f"split {report.get('split')}"
    return f"{report.get('conversations') or 'all'} conversations"


def _cell(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"
