"""python manage.py eval_retrieval: retrieval quality through the real API path.

Loads a corpus (LoCoMo JSONL of ../shared/benchmarks, each user_id a separate end user,
or our golden set under evaluation/data/) into a fresh project, embeds it, asks every case through
POST /api/v1/retrieve (Django's test client: the real URL routing, auth, schemas and
engine), and writes a JSON summary and an HTML report with charts.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser
from django.db import connection, connections
from django.test import Client

from evaluation import baselines, metrics, report
from evaluation.datasets import Case, Dataset, load_golden, load_locomo
from memories import edges, services, tenancy
from memories.models import Memory, Project
from retrieval.ranking.keyword_stats import settle_after_bulk_load
from retrieval.vectors.memory_vectors import embed_memories

# Memories stored per bulk request and embedded per chunk while the next chunk is stored.
LOAD_CHUNK = 1000


class Command(BaseCommand):
    help = "Evaluate retrieval on LoCoMo JSONL or the golden dataset; writes JSON + HTML reports."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", choices=["locomo", "golden", "everyday"], default="golden")
        parser.add_argument("--corpus", help="corpus JSONL (LoCoMo) or golden memories JSONL")
        parser.add_argument("--cases", help="cases JSONL")
        parser.add_argument("--limit", type=int, help="only the first N cases")
        parser.add_argument("--top-k", type=int, default=10, help="memories asked per case")
        parser.add_argument("--min-score", type=float, help="override min_score (0: the ranking without the cut)")
        parser.add_argument("--token-budget", type=int, help="token budget per retrieve")
        parser.add_argument("--hyde", action="store_true", help="turn HyDE on (needs an LLM)")
        parser.add_argument("--baselines", default="../shared/benchmarks/baselines", help="baseline folder (LoCoMo)")
        parser.add_argument("--out", default="reports", help="folder for the JSON and HTML reports")
        parser.add_argument("--reuse", action="store_true", help="reuse an already loaded eval project")

    def handle(self, *args: Any, **options: Any) -> None:
        dataset = load_dataset(options)
        project, ids = eval_project(dataset, reuse=options["reuse"], log=self.stderr.write)
        # A host the default (loopback) ALLOWED_HOSTS accepts; the test client says "testserver".
        client, key = Client(HTTP_HOST="localhost"), tenancy.api_key_create(project=project, name="eval")[1]
        # The default cut, as a user gets it, unless asked otherwise (--min-score 0 ranks).
        min_score = options["min_score"]
        budget = options["token_budget"] or (100_000 if options["dataset"] == "locomo" else project.token_budget)
        back = {memory_id: corpus_id for corpus_id, memory_id in ids.items()}
        results = []
        for number, case in enumerate(dataset.cases, 1):
            body = _request(case, top_k=options["top_k"], min_score=min_score, budget=budget, hyde=options["hyde"])
            started = time.perf_counter()
            answer = client.post(
                "/api/v1/retrieve", body, content_type="application/json", headers={"Authorization": f"Bearer {key}"}
            ).json()
            latency = (time.perf_counter() - started) * 1000
            ranked = [back.get(m["id"], m["id"]) for m in answer["memories"]]
            results.append(
                dataset.result_for(
                    case, ranked, latency_ms=latency, token_count=answer["token_count"], token_budget=budget
                )
            )
            if number % 200 == 0:
                self.stderr.write(f"  {number}/{len(dataset.cases)} cases")
        self._report(
            dataset,
            results,
            options,
            min_score=min_score,
            budget=budget,
            keyword_max_share=settings.MEMORYHUB_KEYWORD_MAX_SHARE,
            keyword_stats_min_rows=settings.MEMORYHUB_KEYWORD_STATS_MIN_ROWS,
        )

    def _report(self, dataset: Dataset, results: list[Any], options: dict[str, Any], **run_settings: Any) -> None:
        summary = metrics.summarise(results)
        comparison = None
        if options["dataset"] == "locomo" and Path(options["baselines"]).is_dir():
            found = baselines.baselines_for_corpus(options["baselines"], options["corpus"])
            comparison = baselines.compare(summary, found) if found else None
        run_info = {
            "dataset": dataset.name,
            "cases": len(results),
            "corpus": len(dataset.corpus),
            "hyde": options["hyde"],
            "top_k": options["top_k"],
            **run_settings,
            "commit": _commit(),
            "date": time.strftime("%Y-%m-%d %H:%M"),
        }
        out = Path(options["out"])
        out.mkdir(parents=True, exist_ok=True)
        report.write_json({"run": run_info, "summary": summary, "comparison": comparison}, out / f"{dataset.name}.json")
        html = report.render_html(
            summary, title=f"Retrieval evaluation: {dataset.name}", run_info=run_info, comparison=comparison
        )
        (out / f"{dataset.name}.html").write_text(html)
        # One line per case (what was expected, what came back): for reading failures.
        with (out / f"{dataset.name}.cases.jsonl").open("w") as lines:
            for result in results:
                record = {"id": result.case_id, "category": result.category, "returned": list(result.ranked_ids)}
                lines.write(json.dumps({**record, "relevant": sorted(result.relevant_ids)}) + "\n")
        _log_mlflow(dataset.name, run_info, summary)
        self.stdout.write(
            json.dumps(
                {
                    "run": run_info,
                    "headline": summary["headline"],
                    "overall": summary["overall"],
                    "categories": summary["categories"],
                    "comparison": comparison,
                },
                indent=1,
                default=str,
            )
        )


def load_dataset(options: dict[str, Any]) -> Dataset:
    """The dataset ``--dataset`` / ``--corpus`` / ``--cases`` / ``--limit`` name."""
    if options["dataset"] == "locomo":
        corpus = options.get("corpus") or "../shared/benchmarks/locomo_corpus.jsonl"
        cases = options.get("cases") or "../shared/benchmarks/locomo_retrieval.jsonl"
        options["corpus"] = corpus
        return load_locomo(corpus, cases, limit=options.get("limit"))
    name = options["dataset"]
    cases = options.get("cases") or f"evaluation/data/{name}.jsonl"
    dataset = load_golden(cases, memories_path=options.get("corpus") or f"evaluation/data/{name}_memories.jsonl")
    if options.get("limit"):
        dataset.cases = dataset.cases[: options["limit"]]
    return dataset


def eval_slug(dataset: Dataset) -> str:
    """The slug of ``dataset``'s evaluation project."""
    return f"eval-{dataset.name}".lower().replace("_", "-")[:90]


def eval_project(dataset: Dataset, *, reuse: bool, log: Any) -> tuple[Project, dict[str, str]]:
    """The evaluation project of ``dataset``, loaded afresh (or reused) and settled; corpus id → memory id."""
    project = tenancy.project_get_or_create(slug=eval_slug(dataset), team_slug="eval")
    project.retrieval_rate_limit, project.hyde_enabled = 0, False  # measure the engine, not the limiter
    project.save(update_fields=["retrieval_rate_limit", "hyde_enabled"])
    if reuse and project.memories.exists():
        mapping = dict(project.memories.values_list("metadata__corpus_id", "pk"))
        settle_after_bulk_load(project.pk)
        return project, {k: str(v) for k, v in mapping.items()}
    clear_project(project)
    project.taxonomy = sorted({*project.taxonomy, *(i.category for i in dataset.corpus if i.category)})
    project.save(update_fields=["taxonomy"])
    ids = load_corpus(project, dataset, log=log)
    settle_after_bulk_load(project.pk)
    return project, ids


def clear_project(project: Project) -> None:
    """Delete the project's memories, for a fresh load (supersede chains unhooked first:
    ``Memory.supersedes`` is PROTECT)."""
    project.memories.update(supersedes=None)
    project.memories.all().delete()


def load_corpus(project: Project, dataset: Dataset, *, log: Any) -> dict[str, str]:
    """Store the corpus through the services (supersedes and links too) and embed it; corpus id → memory id.

    As the service does it: each chunk of new memories embeds on another thread (its own database
    connection, as a Celery worker's) while the next chunk is stored (``_Embedding``).
    """
    ids: dict[str, str] = {}
    plain = [item for item in dataset.corpus if not item.supersedes]
    with _Embedding(log) as embedding:
        for start in range(0, len(plain), LOAD_CHUNK):
            chunk = plain[start : start + LOAD_CHUNK]
            drafts = [_draft(item) for item in chunk]
            memories = services.memory_bulk_create(project=project, drafts=drafts, actor="system:eval")
            for item, memory in zip(chunk, memories, strict=True):
                ids[item.id] = str(memory.pk)
            embedding.add(memories)
        for item in (i for i in dataset.corpus if i.supersedes):
            old = Memory.objects.get(pk=ids[str(item.supersedes)])
            ids[item.id] = str(services.memory_supersede(memory=old, draft=_draft(item), actor="system:eval").pk)
        for item in dataset.corpus:
            for link in item.links:
                source, target = Memory.objects.get(pk=ids[item.id]), Memory.objects.get(pk=ids[link.to])
                edges.edge_link(source=source, target=target, relationship=link.relationship, actor="system:eval")
    # What is not embedded yet (a superseding memory whose inline embedding failed, say).
    memories = list(project.memories.select_related("project").exclude(embedding_status="ready"))
    for start in range(0, len(memories), LOAD_CHUNK):
        embed_memories(memories[start : start + LOAD_CHUNK])
    return ids


class _Embedding:
    """Embeds the chunks given to ``add`` in order, on one thread with its own database connection
    (closed at the end); inside a transaction (the tests' ``db``), where another connection could
    not see the new rows, at once instead. Leaving the block waits for every chunk."""

    def __init__(self, log: Any) -> None:
        self.log = log
        self.done = 0
        self.pending: list[Future[int]] = []
        self.thread = None if connection.in_atomic_block else ThreadPoolExecutor(1, thread_name_prefix="load-embed")

    def add(self, memories: list[Memory]) -> None:
        if self.thread is None:
            self._embed(memories)
        else:
            self.pending.append(self.thread.submit(self._embed, memories))

    def _embed(self, memories: list[Memory]) -> int:
        embed_memories(memories)
        self.done += len(memories)
        self.log(f"  embedded {self.done}")
        return len(memories)

    def __enter__(self) -> _Embedding:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.thread is None:
            return
        try:
            for future in self.pending:
                future.result()
        finally:
            self.thread.submit(connections.close_all).result()  # the thread's own connection
            self.thread.shutdown()


def _draft(item: Any) -> services.MemoryDraft:
    return services.MemoryDraft(
        user_id=item.user_id,
        content=item.text,
        kind=item.kind or "fact",
        category=item.category or "",
        scope=item.scope,
        metadata={"corpus_id": item.id},
    )


def _request(case: Case, *, top_k: int, min_score: float | None, budget: int, hyde: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"user_id": case.user_id, "limit": top_k, "token_budget": budget, "hyde": hyde}
    if case.messages:
        body["messages"] = [{"role": m.role, "content": m.content} for m in case.messages]
    else:
        body["query"] = case.query
    if min_score is not None:
        body["min_score"] = min_score
    return body


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""


def _log_mlflow(name: str, run_info: dict[str, Any], summary: dict[str, Any]) -> None:
    """Log the run to MLflow when MLFLOW_TRACKING_URI is set and mlflow is installed (optional extra)."""
    if not os.environ.get("MLFLOW_TRACKING_URI"):
        return
    import mlflow  # noqa: PLC0415 (optional: pip install mlflow)

    with mlflow.start_run(run_name=f"retrieval-{name}"):
        mlflow.log_params({k: v for k, v in run_info.items() if isinstance(v, str | int | float | bool)})
        mlflow.log_metrics({k: v for k, v in summary["headline"].items() if isinstance(v, int | float)})
