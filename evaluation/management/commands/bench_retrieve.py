"""python manage.py bench_retrieve: retrieve latency over HTTP with 100k memories over 10 users.

Seeds (or reuses) a ``bench-retrieve`` project, starts gunicorn on a free loopback
port, and measures the first retrieves it answers (warm start), then, after ``WARM_UP_REQUESTS``
untimed ones, POST /api/v1/retrieve p50/p95/p99, throughput and the CPU a request costs the web
workers and the database backends (``evaluation/process_cpu.py``) at 1 and 4 concurrent clients,
with HyDE off and with HyDE against a fast loopback stub.

The memories are 100k different sentences (``evaluation.synthetic.varied_memories``), each
embedded with the real model (~1,100 texts/s on two cores); the questions come from the same
generator. Their nearest-neighbour cosines are spread as LoCoMo's are. An earlier corpus
was ~8,400 sentences with "(note N)" variants of each, and one vector per sentence reused for its
variants: pgvector keeps identical vectors as one graph element, so the HNSW graph had ~8.4k
elements, and every walk was cheaper than on 100k memories (docs/adr/0053-benchmark-method.md).
A home seeded with that corpus is seeded again.
"""

from __future__ import annotations

import http.client
import itertools
import json
import statistics
import threading
import time
import uuid
from collections import Counter
from typing import Any

import numpy as np
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection, transaction

from evaluation import machine
from evaluation.harness import Service
from evaluation.process_cpu import CpuWindow, descendants
from evaluation.synthetic import varied_memories
from memories import services, tenancy
from memories.fields import vector_literal
from memories.models import Embedding, EmbeddingStatus, Memory, Project
from retrieval.embedding.embedders import embedder_for_model
from retrieval.embedding.local_embedder import LOCAL_MODEL_NAME
from retrieval.embedding.vector_cache import embed_texts, forget_cached, project_cache_name
from retrieval.models import KeywordStats
from retrieval.ranking.keyword_stats import refresh_keyword_stats, settle_after_bulk_load
from retrieval.ranking.search import HALF_SPARE, HNSW_EF_SEARCH, VECTOR_SPARE, reads_exactly, search_settings
from retrieval.vectors import resident_vectors
from retrieval.vectors.vector_index import ensure_vector_index

USERS = 10


class Command(BaseCommand):
    help = "Seed 100k memories over 10 users (or reuse them) and measure retrieve latency over HTTP."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--memories", type=int, default=100_000)
        parser.add_argument("--requests", type=int, default=400, help="requests per scenario")
        parser.add_argument("--concurrency", default="1,4")
        parser.add_argument("--no-hyde-stub", action="store_true")
        parser.add_argument("--recall-queries", type=int, default=200, help="queries for the vector recall check")
        parser.add_argument(
            "--tag-questions",
            action="store_true",
            help="append a random tag to each question, as earlier versions of this bench did (to compare figures)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        project = seed(options["memories"], log=self.stderr.write)
        _, key = tenancy.api_key_create(project=project, name="bench")
        report: dict[str, Any] = {
            "memories": project.memories.count(),
            "users": USERS,
            "warm_up_requests": WARM_UP_REQUESTS,
            "machine": machine.describe(),
            "scenarios": [],
        }
        self.stderr.write(f"machine: {machine.summary(report['machine'])}")
        report["vector_recall"] = vector_recall(project, queries=options["recall_queries"])
        self.stderr.write(f"vector stage vs exact search: {report['vector_recall']}")
        # "window": the question inside a three-message window, as an agent sends its conversation;
        # the engine embeds the question and the last messages, two query vectors (HyDE off).
        scenarios: list[tuple[str, dict[str, str]]] = [("hyde_off", {}), ("window", {})]
        stub = None
        if not options["no_hyde_stub"]:
            from tests.support.openai_server import FakeOpenAI  # noqa: PLC0415 (the tests' loopback stub, unless --no-hyde-stub)

            stub = FakeOpenAI().start()
            stub.default_chat = "The user prefers PostgreSQL.\nThe team decided to use Celery."
            scenarios.append(("hyde_stub", {"MEMORYHUB_LLM_BASE_URL": stub.base_url, "OPENAI_API_KEY": "bench"}))
        try:
            for name, env in scenarios:
                # Configured like make run; ready once a web worker answers (/health: 200, or 503
                # without a Celery worker).
                with Service(worker=False, env=env, ready="answering") as server:
                    port = server.port
                    if name == "hyde_off":
                        report["first_calls_ms"] = first_calls(port, key)
                        self.stderr.write(f"first calls after start: {report['first_calls_ms']}")
                    # Then the steady state a running service is in: every worker has asked for
                    # every user once (its copy of their vectors read) before the clock starts.
                    warm_up(port, key, hyde=name == "hyde_stub", window=name == "window")
                    for clients in (int(c) for c in options["concurrency"].split(",")):
                        row = measure(
                            port,
                            key,
                            clients=clients,
                            requests=options["requests"],
                            hyde=name == "hyde_stub",
                            window=name == "window",
                            web_pids=descendants(server.processes["web"].pid),
                            project_id=project.pk,
                            tag=options["tag_questions"],
                        )
                        report["scenarios"].append({"scenario": name, **row})
                        self.stderr.write(f"{name} x{clients}: {row}")
        finally:
            if stub:
                stub.stop()
        self.stdout.write(json.dumps(report, indent=2))


# The engine's vector stage for a group larger than VECTOR_EXACT_MAX_ROWS: the filtered HNSW walk
# fetches depth (50) + VECTOR_SPARE rows (relaxed order, so the walk may yield them slightly out of
# order), then ranks them by exact distance.
HNSW_TOP10 = f"""
WITH walk AS MATERIALIZED (
    SELECT memory_id, vector::vector(384) <=> %(q)s::vector(384) AS d FROM memories_embedding
    WHERE model = %(model)s AND project_id = %(project)s AND (user_id = %(user)s OR scope = 'project')
    ORDER BY vector::vector(384) <=> %(q)s::vector(384) LIMIT {50 + VECTOR_SPARE}
)
SELECT memory_id, d FROM walk ORDER BY d LIMIT 10
"""
# The same rows by an exact search through the table ("+ 0" hides the ORDER BY from the index).
EXACT_TOP10 = """
SELECT memory_id, vector::vector(384) <=> %(q)s::vector(384) FROM memories_embedding
WHERE model = %(model)s AND project_id = %(project)s AND (user_id = %(user)s OR scope = 'project')
ORDER BY (vector::vector(384) <=> %(q)s::vector(384)) + 0 LIMIT 10
"""
# The engine's read of a user's own group up to VECTOR_EXACT_MAX_ROWS (the bench has no shared
# memories): the nearest by the half-precision copies, from embedding_owner_half alone, HALF_SPARE
# more than kept, then ordered by the full vectors.
OWN_EXACT_TOP = f"""
SELECT e.memory_id, e.vector::vector(384) <=> %(q)s::vector(384) AS d
FROM (SELECT memory_id FROM memories_embedding
      WHERE model = %(model)s AND project_id = %(project)s AND user_id = %(user)s
      ORDER BY (vector_half::halfvec(384) <=> l2_normalize(%(q)s::vector(384))::halfvec(384)) + 0
      LIMIT {50 + VECTOR_SPARE + HALF_SPARE}) picked
JOIN memories_embedding e ON e.memory_id = picked.memory_id AND e.model = %(model)s
ORDER BY d LIMIT {50 + VECTOR_SPARE}
"""


def vector_recall(project: Project, queries: int = 200) -> dict[str, Any]:
    """How often the filtered HNSW top 10 (engine settings) equals an exact search of the user's rows,
    and what the walk, Postgres's exact read of a user's own vectors and an exact search through
    the table cost, and how often that exact read's top 10 equals the exact search; the same for the
    web process's resident copy (``retrieval.vectors.resident_vectors``: reading a group, refreshing it after
    one row is written again, a pick). ``engine_reads``: which of them the engine uses for a bench user.

    Tie-aware: a row counts when its distance is within the exact 10th distance.

    The walk is what a group above VECTOR_EXACT_MAX_ROWS gets; the bench's groups are smaller, so the
    sweeper would never build the graph for them (``retrieval.vectors.vector_index``): it is built here, and
    the figures are the walk through it.
    """
    if not ensure_vector_index(LOCAL_MODEL_NAME, 384):  # else the "walk" would be an exact scan
        raise CommandError("the HNSW index could not be built now (another build holds its lock); run again")
    texts = questions(queries, seed=5)
    vectors = embed_texts(texts, embedder=embedder_for_model(LOCAL_MODEL_NAME))
    matches, own_matches, timings, exact_timings, own_timings = 0, 0, [], [], []
    # The web process's resident copy (retrieval.vectors.resident_vectors): each group read once, then picked.
    groups, load_timings, pick_timings, resident_matches = {}, [], [], 0
    budget = resident_vectors.process_cache().budget
    with connection.cursor() as cursor:
        for owner in [*(f"user-{n}" for n in range(USERS)), resident_vectors.SHARED]:
            started = time.perf_counter()
            groups[owner] = resident_vectors.read(
                cursor, None, project=project.pk, model=LOCAL_MODEL_NAME, owner=owner, budget=budget
            )
            load_timings.append((time.perf_counter() - started) * 1000)
        # One memory of user-0's written again (the same vector: nothing else changes): a holder
        # reads that row again, not the group.
        cursor.execute(
            "UPDATE memories_embedding SET content_hash = content_hash WHERE memory_id = %s AND model = %s",
            [groups["user-0"].ids[0], LOCAL_MODEL_NAME],
        )
        started = time.perf_counter()
        groups["user-0"] = resident_vectors.read(
            cursor, groups["user-0"], project=project.pk, model=LOCAL_MODEL_NAME, owner="user-0", budget=budget
        )
        refresh_ms = (time.perf_counter() - started) * 1000
    for i, vector in enumerate(vectors):
        params: dict[str, Any] = {
            "q": vector_literal(vector),
            "model": LOCAL_MODEL_NAME,
            "project": project.pk,
            "user": f"user-{i % USERS}",
        }
        with transaction.atomic(), connection.cursor() as cursor, search_settings(cursor):  # the engine's own
            started = time.perf_counter()
            cursor.execute(HNSW_TOP10, params)
            timings.append((time.perf_counter() - started) * 1000)
            approx = cursor.fetchall()
            started = time.perf_counter()
            cursor.execute(EXACT_TOP10, params)
            exact_timings.append((time.perf_counter() - started) * 1000)
            exact = cursor.fetchall()
            started = time.perf_counter()
            cursor.execute(OWN_EXACT_TOP, params)
            own_timings.append((time.perf_counter() - started) * 1000)
            own = cursor.fetchall()[:10]
        started = time.perf_counter()
        picked = resident_vectors.pick(
            groups[params["user"]], groups[""], user_id=params["user"], queries=vector[None, :], fetch=50 + VECTOR_SPARE
        )
        pick_timings.append((time.perf_counter() - started) * 1000)
        cutoff = exact[-1][1] + 1e-6 if exact else 0
        matches += len(approx) == len(exact) and all(d <= cutoff for _, d in approx)
        own_matches += len(own) == len(exact) and all(d <= cutoff for _, d in own)
        resident_matches += len(picked.ids[:10]) == len(exact) and all(d <= cutoff for d in picked.distances[:10])
    return {
        "queries": queries,
        "matching_exact": round(matches / queries, 4),
        "ef_search": HNSW_EF_SEARCH,
        "hnsw_p50_ms": round(float(np.percentile(timings, 50)), 2),
        "exact_p50_ms": round(float(np.percentile(exact_timings, 50)), 2),
        "own_exact_p50_ms": round(float(np.percentile(own_timings, 50)), 2),
        # The engine's exact read (half-precision pick, full-vector order) against the exact search.
        "own_exact_matching_exact": round(own_matches / queries, 4),
        # The resident copy: reading a group into a process (once per process and generation), the
        # pick from it, and its top 10 against the exact search.
        "resident_load_p50_ms": round(float(np.percentile(load_timings, 50)), 2),
        "resident_pick_p50_ms": round(float(np.percentile(pick_timings, 50)), 3),
        "resident_refresh_ms": round(refresh_ms, 2),
        "resident_matching_exact": round(resident_matches / queries, 4),
        # As the engine decides: from its process's copy when it holds the groups, else by Postgres,
        # exactly or walked by the word statistics of a user's memories.
        "engine_reads": "resident"
        if resident_vectors.enabled() and all(g.vectors is not None for g in groups.values())
        else "exact"
        if reads_exactly(_own_rows(project, "user-0"))
        else "walk",
    }


def _own_rows(project: Project, user_id: str) -> int | None:
    return KeywordStats.objects.filter(project=project, owner=user_id).values_list("rows", flat=True).first()


def seed(count: int, *, log: Any) -> Project:
    project = tenancy.project_get_or_create(slug="bench-retrieve")
    project.retrieval_rate_limit, project.hyde_enabled = 0, True
    project.save(update_fields=["retrieval_rate_limit", "hyde_enabled"])
    texts = varied_memories(count, seed=7)
    if project.memories.count() == count and project.memories.filter(content__in=[texts[0], texts[-1]]).count() == 2:
        refresh_keyword_stats(project_id=project.pk)
        return project
    project.memories.all().delete()
    # The model itself, not embed_texts: its Redis cache would keep 100k vectors nobody asks for.
    embedder = embedder_for_model(LOCAL_MODEL_NAME)
    for start in range(0, count, 5000):
        chunk = texts[start : start + 5000]
        vectors = embedder.embed(chunk)
        memories = Memory.objects.bulk_create(
            [
                Memory(
                    project=project,
                    user_id=f"user-{(start + i) % USERS}",
                    content=t,
                    content_hash=services.content_hash(t),
                    created_by="system:bench",
                    embedding_status=EmbeddingStatus.READY,
                )
                for i, t in enumerate(chunk)
            ]
        )
        Embedding.objects.bulk_create(
            [
                Embedding(
                    memory=m,
                    project=project,
                    user_id=m.user_id,
                    scope=m.scope,
                    model=LOCAL_MODEL_NAME,
                    dimension=384,
                    vector=vector,
                    content_hash=m.content_hash,
                )
                for m, vector in zip(memories, vectors, strict=True)
            ]
        )
        log(f"seeded {start + len(chunk)}/{count}")
    settle_after_bulk_load(project.pk)
    return project


def first_calls(port: int, key: str, *, calls: int = 8) -> list[float]:
    """The first retrieves a freshly started server answers (warm start: as fast as later ones?).

    Each on a new connection, as many as it takes to reach every worker process and thread.
    """
    latencies = []
    for n, query in enumerate(questions(calls, seed=11)):
        conn = _client(port)
        started = time.perf_counter()
        _post(conn, key, query, hyde=False, user=n % USERS)
        latencies.append(round((time.perf_counter() - started) * 1000, 1))
        conn.close()
    return latencies


# Per connection, each user asked ten times: the worker that holds the connection reads its copy of
# every user's vectors before the clock starts.
WARM_UP_REQUESTS = 4 * USERS * 10


def warm_up(port: int, key: str, *, hyde: bool, window: bool = False) -> None:
    """``WARM_UP_REQUESTS`` untimed retrieves from four connections, each connection asking every
    user in turn (``user_for``): each gunicorn worker reads its copy of each user's vectors
    (``retrieval.vectors.resident_vectors``, on a loader thread: 100-300 ms a user) once, as a server does
    in its first minutes, not inside the measured requests. ``first_calls`` reports what a fresh
    server answers."""
    measure(port, key, clients=4, requests=WARM_UP_REQUESTS, hyde=hyde, window=window)
    time.sleep(1)  # a loader thread still reading a copy finishes before the clock starts


# Each call of ``measure`` asks questions of its own (a seed no earlier call of this process used).
_QUESTION_SEEDS = itertools.count(1000)


def measure(
    port: int,
    key: str,
    *,
    clients: int,
    requests: int,
    hyde: bool,
    window: bool = False,
    web_pids: list[int] | None = None,
    project_id: int | None = None,
    tag: bool = False,
) -> dict[str, Any]:
    """Latency and throughput of ``requests`` retrieves from ``clients`` connections (``window``: each
    question sent in a message window); with the web workers' ``web_pids``, also the CPU a request
    cost them and the database backends.

    Every question is embedded afresh: no two requests ask the same one, and with ``project_id``
    the project's cached query vectors are dropped before the clock starts (earlier runs on this
    home asked some of them). ``tag`` appends a random tag to each question instead, as earlier
    versions of this bench did: ~9 more tokens to embed and two more words to search.
    """
    queries = questions(requests + 50, seed=next(_QUESTION_SEEDS))
    latencies: list[float] = []
    degraded: list[str] = []
    lock = threading.Lock()
    warm = _client(port)
    for q in queries[:20]:  # warm every worker's model and connection
        _post(warm, key, q, hyde=hyde, user=0)
    warm.close()  # not left open beside the clients' connections
    if project_id is not None:  # an earlier bench process on this home asked the same seeds' questions
        forget_cached(project_cache_name("*", project_id))

    def worker(offset: int) -> None:
        conn = _client(port)
        for n in range(offset, requests, clients):
            started = time.perf_counter()
            query = f"{queries[50 + n]} (ref {uuid.uuid4().hex[:8]})" if tag else queries[50 + n]
            earlier = queries[n % 50] if window else None
            stages = _post(conn, key, query, hyde=hyde, user=user_for(n, clients=clients), earlier=earlier)
            with lock:
                latencies.append((time.perf_counter() - started) * 1000)
                degraded.extend(stages)

    cpu = CpuWindow(web_pids).start() if web_pids else None
    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    cpu_row = {"cpu_ms_per_request": cpu.stop(len(latencies))} if cpu else {}
    quantiles = [float(v) for v in np.percentile(latencies, [50, 95, 99])]
    return {
        "clients": clients,
        "requests": len(latencies),
        "p50_ms": round(quantiles[0], 1),
        "p95_ms": round(quantiles[1], 1),
        "p99_ms": round(quantiles[2], 1),
        "mean_ms": round(statistics.mean(latencies), 1),
        "throughput_rps": round(len(latencies) / seconds, 1),
        # Answers that skipped a stage (HyDE down, a timeout) are fast for the wrong reason.
        "degraded": dict(Counter(degraded)),
        **cpu_row,
    }


def user_for(n: int, *, clients: int) -> int:
    """The user the ``n``-th request asks about when ``clients`` connections share the requests
    (connection ``n % clients`` sends it): each connection asks every user in turn, and at any
    moment the connections ask different users. Asking ``n % USERS`` instead, four connections
    and ten users split into two that only ever asked the even users and two the odd ones, so a
    worker could go into the clock without half of the users' vectors."""
    return (n % clients + n // clients) % USERS


def questions(count: int, *, seed: int) -> list[str]:
    """Questions as an agent would ask about such memories: sentences of the corpus's generator."""
    return [f"{sentence.rstrip('.')}?" for sentence in varied_memories(count, seed=seed)]


def _client(port: int) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", port, timeout=30)


def retrieve_body(query: str, *, hyde: bool, user: int, earlier: str | None = None) -> dict[str, Any]:
    """A retrieve request's body: ``query`` alone, or with ``earlier`` the last message of a window
    that asked ``earlier`` and got an answer."""
    body: dict[str, Any] = {"user_id": f"user-{user}", "hyde": hyde, "turn_id": uuid.uuid4().hex}
    if earlier is None:
        return body | {"query": query}
    window = [{"role": "user", "content": earlier}, {"role": "assistant", "content": "Noted."}]
    return body | {"messages": [*window, {"role": "user", "content": query}]}


def _post(
    conn: http.client.HTTPConnection, key: str, query: str, *, hyde: bool, user: int, earlier: str | None = None
) -> list[str]:
    """One retrieve (``retrieve_body``); the stages it names as degraded."""
    body = json.dumps(retrieve_body(query, hyde=hyde, user=user, earlier=earlier))
    conn.request(
        "POST", "/api/v1/retrieve", body, {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    )
    response = conn.getresponse()
    answer = response.read()
    if response.status != 200:
        raise RuntimeError(f"retrieve answered {response.status}")
    return list(json.loads(answer)["degraded"])
