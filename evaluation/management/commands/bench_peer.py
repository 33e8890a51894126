"""python manage.py bench_peer: MemoryHub and mem0 on the same LoCoMo corpus, back to back.

Runs the peer harness (``../shared/peers/mem0_locomo.py``: mem0 OSS, same embedding model, same
Postgres + pgvector) in its own virtualenv and network namespace, then loads the same corpus into
MemoryHub and asks the same questions with the settings a user gets (the default relevance cut,
limit 10), and prints both side by side with the ratios. ``make bench`` sets up the peer's
virtualenv and runs this.

MemoryHub is timed two ways, both in process like the peer's ``Memory.search()``:
- ``engine``: ``retrieval.engine.retrieve()`` (the library call, as mem0's search is);
- ``api``: ``POST /api/v1/retrieve`` through Django's test client (authentication, row security,
  validation, serialisation and the retrieval log included), as ``eval_retrieval`` measures.
Add rate: corpus lines per second through ``memory_bulk_create`` and the embedding of every memory
(what ``POST /memories/bulk`` and the worker do), against mem0's ``add(..., infer=False)``; on both
sides the embedding model is loaded before the clock starts, and an earlier run's load is deleted
and vacuumed first (the peer's store starts empty).
Query vectors are never served from the cache: each pass embeds its questions afresh.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.test import Client

from evaluation import machine, metrics
from evaluation.datasets import Dataset, load_locomo
from evaluation.management.commands.eval_retrieval import clear_project, eval_project, eval_slug
from memories import tenancy
from memories.models import Project
from retrieval.embedding.embedders import get_embedder
from retrieval.embedding.local_embedder import LocalEmbedder
from retrieval.embedding.vector_cache import forget_cached, project_cache_name
from retrieval.engine import retrieve
from retrieval.shapes import RetrieveRequest

VARIANTS = {
    "turns": ("locomo_corpus.jsonl", "locomo_retrieval.jsonl"),
    "obs": ("locomo_obs_corpus.jsonl", "locomo_obs_retrieval.jsonl"),
    "session": ("locomo_session_corpus.jsonl", "locomo_session_retrieval.jsonl"),
}
TOP_K = 10
# LoCoMo answers are long; the peer returns its top 10 whatever their length.
TOKEN_BUDGET = 100_000


class Command(BaseCommand):
    help = "Run mem0 (the peer) and MemoryHub on one LoCoMo corpus back to back and print the ratios."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--variant", choices=sorted(VARIANTS), default="obs")
        parser.add_argument("--bench-dir", default="../shared/benchmarks")
        parser.add_argument("--peer-python", help="the peer virtualenv's python (make bench sets it up)")
        parser.add_argument("--peer-script", default="../shared/peers/mem0_locomo.py")
        parser.add_argument("--skip-peer", action="store_true", help="MemoryHub only")
        parser.add_argument("--limit", type=int, help="only the first N cases (a quick look, not a figure)")
        parser.add_argument("--out", default="reports", help="folder for bench_peer-<variant>.json")

    def handle(self, *args: Any, **options: Any) -> None:
        corpus_file, cases_file = VARIANTS[options["variant"]]
        bench = Path(options["bench_dir"])
        dataset = load_locomo(bench / corpus_file, bench / cases_file, limit=options["limit"])
        if options["limit"]:  # as the peer does: only the asked users' memories
            users = {case.user_id for case in dataset.cases}
            dataset.corpus = [item for item in dataset.corpus if item.user_id in users]
        peer = None if options["skip_peer"] else self._run_peer(options)
        ours = measure_memoryhub(dataset, log=self.stderr.write)
        report = {"variant": options["variant"], "machine": machine.describe(), "peer": peer, "memoryhub": ours}
        report["ratios"] = ratios(peer, ours) if peer else None
        out = Path(options["out"])
        out.mkdir(parents=True, exist_ok=True)
        (out / f"bench_peer-{options['variant']}.json").write_text(json.dumps(report, indent=1))
        self.stdout.write(table(report))

    def _run_peer(self, options: dict[str, Any]) -> dict[str, Any]:
        python = options["peer_python"]
        if not python or not Path(python).exists():
            raise CommandError("--peer-python names no interpreter: run `make bench` (it sets the peer up)")
        workdir = Path(os.environ.get("MEMORYHUB_HOME", tempfile.gettempdir())) / "peer-run"
        shutil.rmtree(workdir, ignore_errors=True)
        summary = workdir.parent / f"peer-{options['variant']}.json"
        command = [python, options["peer_script"], "--variant", options["variant"], "--workdir", str(workdir)]
        command += ["--bench-dir", options["bench_dir"], "--json-out", str(summary), "--explain-sample", "0"]
        if options["limit"]:
            command += ["--limit-cases", str(options["limit"])]
        # No network for the peer (it counts any attempt): a namespace of its own where we may make one.
        if shutil.which("unshare") and os.geteuid() == 0:
            command = ["unshare", "-n", *command]
        self.stderr.write("peer: " + " ".join(command))
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        result: dict[str, Any] = json.loads(summary.read_text())
        result.pop("per_case", None)
        return result


def measure_memoryhub(dataset: Dataset, *, log: Any) -> dict[str, Any]:
    """Load the corpus (timed, embedding included) and ask every case through the engine and the API."""
    forget_cached()  # nothing cached from an earlier run: memories and questions embed afresh
    # The model loads before the clock starts, as the peer's does (Memory.from_config, untimed)
    # and as a web worker's does at start-up (gunicorn_conf).
    if isinstance(embedder := get_embedder(), LocalEmbedder):
        embedder.load()
    # An earlier run's load is deleted before the clock too, and its dead rows vacuumed (else
    # autovacuum cleans the HNSW index while the questions run): the peer starts from an empty store.
    if earlier := Project.objects.filter(slug=eval_slug(dataset)).first():
        clear_project(earlier)
        with connection.cursor() as cursor:
            cursor.execute(
                "VACUUM (ANALYZE) memories_memory, memories_memoryrevision, memories_embedding, memories_memoryterm"
            )
    started = time.perf_counter()
    project, ids = eval_project(dataset, reuse=False, log=log)
    add_s = time.perf_counter() - started
    back = {memory_id: corpus_id for corpus_id, memory_id in ids.items()}
    engine = _ask(dataset, back, lambda case: _engine(project, case), project=project)
    _, key = tenancy.api_key_create(project=project, name="bench-peer")
    client = Client(HTTP_HOST="localhost")
    api = _ask(dataset, back, lambda case: _api(client, key, case), project=project)
    return {
        "memories_added": len(dataset.corpus),
        "add_total_s": round(add_s, 2),
        "add_throughput_per_s": round(len(dataset.corpus) / add_s, 1),
        "engine": engine,
        "api": api,
    }


def _engine(project: Project, case: Any) -> list[str]:
    request = RetrieveRequest(user_id=case.user_id, query=case.query, limit=TOP_K, token_budget=TOKEN_BUDGET)
    return [str(hit.memory.pk) for hit in retrieve(project=project, request=request).memories]


def _api(client: Client, key: str, case: Any) -> list[str]:
    body = {"user_id": case.user_id, "query": case.query, "limit": TOP_K, "token_budget": TOKEN_BUDGET}
    response = client.post(
        "/api/v1/retrieve", body, content_type="application/json", headers={"Authorization": f"Bearer {key}"}
    )
    if response.status_code != 200:
        raise CommandError(f"retrieve answered {response.status_code}: {response.content[:200]!r}")
    return [memory["id"] for memory in response.json()["memories"]]


def _ask(dataset: Dataset, back: dict[str, str], ask: Any, *, project: Project) -> dict[str, Any]:
    _forget_query_vectors(project)
    for case in dataset.cases[:3]:  # warm-up, as the peer does
        ask(case)
    _forget_query_vectors(project)
    results, latencies = [], []
    for case in dataset.cases:
        started = time.perf_counter()
        ranked = ask(case)
        latency = (time.perf_counter() - started) * 1000
        latencies.append(latency)
        results.append(dataset.result_for(case, [back.get(i, i) for i in ranked], latency_ms=latency))
    summary = metrics.summarise(results)
    return {"latency_ms": percentiles(latencies), "headline": _figures(summary["headline"])}


def _forget_query_vectors(project: Project) -> None:
    forget_cached(project_cache_name("*", project.pk))


def _figures(group: dict[str, Any]) -> dict[str, Any]:
    return {name: round(group[name], 4) for name in ("R@5", "R@10", "NDCG@10", "MRR")} | {"n": group["n"]}


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(share: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))], 2)

    return {"p50": at(0.5), "p95": at(0.95), "p99": at(0.99), "mean": round(statistics.mean(values), 2)}


def ratios(peer: dict[str, Any], ours: dict[str, Any]) -> dict[str, float]:
    theirs = peer["search_latency_ms"]
    return {
        "engine_p95_vs_peer": round(ours["engine"]["latency_ms"]["p95"] / theirs["p95"], 3),
        "engine_p50_vs_peer": round(ours["engine"]["latency_ms"]["p50"] / theirs["p50"], 3),
        "api_p95_vs_peer": round(ours["api"]["latency_ms"]["p95"] / theirs["p95"], 3),
        "api_p50_vs_peer": round(ours["api"]["latency_ms"]["p50"] / theirs["p50"], 3),
        "add_rate_vs_peer": round(ours["add_throughput_per_s"] / peer["add_throughput_per_s"], 2),
    }


def table(report: dict[str, Any]) -> str:
    """The side-by-side table (Markdown) and the ratios."""
    rows = ["| system | R@10 | NDCG@10 | p50 ms | p95 ms | add / s |", "|---|---|---|---|---|---|"]
    peer, ours = report["peer"], report["memoryhub"]
    if peer:
        group = peer["results"]["all_non_adversarial"]
        latency = peer["search_latency_ms"]
        rows.append(
            f"| mem0 {peer['versions']['mem0ai']} search | {group['R@10']:.3f} | {group['NDCG@10']:.3f} "
            f"| {latency['p50']} | {latency['p95']} | {peer['add_throughput_per_s']} |"
        )
    for name in ("engine", "api"):
        part = ours[name]
        rows.append(
            f"| MemoryHub {name} (defaults) | {part['headline']['R@10']:.3f} | {part['headline']['NDCG@10']:.3f} "
            f"| {part['latency_ms']['p50']} | {part['latency_ms']['p95']} | {ours['add_throughput_per_s']} |"
        )
    lines = [
        f"LoCoMo {report['variant']}: {ours['memories_added']} memories, {ours['engine']['headline']['n']} "
        "questions (categories 1-4)",
        f"machine: {machine.summary(report['machine'])}",
        *rows,
    ]
    if report["ratios"]:
        lines.append("ratios (MemoryHub / mem0): " + json.dumps(report["ratios"]))
    return "\n".join(lines)
