"""python manage.py eval_pipeline: conversations in, answers out, through the real HTTP pipeline.

Starts gunicorn (configured like ``make run``) and a Celery worker on this home's embedded
servers (run it under a home of its own: ``make eval-pipeline`` uses ``$(MEMORYHUB_HOME)/eval``),
creates fresh projects and API keys (no retrieval rate limit; a project per person or LoCoMo
conversation unless ``--shared-project``), captures every session through
``POST /api/v1/capture`` (``trigger: compaction``), waits for every job and for the memories'
embeddings, then asks every question through ``POST /api/v1/retrieve`` (``limit: 10``). Scoring
is in ``evaluation/pipeline_scores.py``. Prints tables per group (split or conversation) and per type
(question type or LoCoMo category), then one JSON line; ``--out`` writes the JSON too.

Datasets:

* ``--dataset natural [--split dev|heldout|all]``: ``evaluation/data/pipeline/natural.jsonl`` (its README);
  ``--natural evaluation/data/pipeline/natural_more.jsonl`` for the set written later.
* ``--dataset locomo --locomo PATH [--conversations N]``: LoCoMo's ``locomo10.json`` read from
  PATH at run time (CC BY-NC evaluation data: never copied into the repository). Each speaker is
  their own user (their turns ``user``, the other's ``assistant``); category 1–4 questions only.
  A question goes to the speaker it names (a capitalised word equal to their first name, or a
  start of it of 3+ letters, "Mel" for Melanie); naming both or neither, it goes to both and the
  two answers are merged by score.

Maintenance: ``--consolidate`` asks every question once after capture, consolidates every user
through ``POST /api/v1/users/{id}/consolidate`` (the worker runs them), then asks them again; the
report gains ``maintenance``: duplicates per 100 memories and stale-value-ranked-first before and
after (``evaluation/maintenance.py`` defines a duplicate), and the runs' counts.

Extractor: whatever this environment configures (the rules without an LLM); ``--llm-url`` and
``--llm-model`` point the worker (only the worker: retrieval stays as it is) at an
OpenAI-compatible endpoint.

The peer: ``--peer mem0`` sends the same plan through mem0 OSS instead (``evaluation/peer_pipeline.py``:
every turn stored raw with ``add(..., infer=False)``, its turn id in the metadata, one ``search`` per
question and user), in the peer's virtualenv (``--peer-python``, the one ``make bench`` builds)
through the harness ``--peer-harness``. No server of ours starts. One report per mem0 search
``threshold`` in ``--peer-thresholds`` (mem0's default 0.1 first), each a JSON line.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from evaluation import machine, maintenance
from evaluation.harness import Service
from evaluation.natural import NATURAL_PATH
from evaluation.peer_pipeline import MEM0_DEFAULT_THRESHOLD, peer_jobs, peer_results, run_driver
from evaluation.pipeline import (
    JobRecord,
    Plan,
    ask_all,
    capture_all,
    locomo_plan,
    natural_plan,
    rebuild_profiles,
)
from evaluation.pipeline_scores import aggregate, details, score_question, summarize, table
from memories import tenancy
from memories.models import EmbeddingStatus, Memory
from serving import local_llm


class _Service(Service):
    """The harness's gunicorn + worker, with environment variables for the worker alone."""

    def __init__(self, *, worker_env: dict[str, str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.worker_env = worker_env

    def start(self, name: str) -> None:
        if name != "worker" or not self.worker_env:
            super().start(name)
            return
        shared = self.env
        self.env = {**shared, **self.worker_env}
        try:
            super().start(name)
        finally:
            self.env = shared


class Command(BaseCommand):
    help = "Capture conversations over HTTP, then retrieve answers: evidence recall from provenance, end to end."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", choices=["natural", "locomo"], required=True)
        parser.add_argument("--split", choices=["dev", "heldout", "all"], default="all", help="natural set only")
        parser.add_argument("--natural", default=str(NATURAL_PATH), help="the natural set's file")
        parser.add_argument("--people", type=int, help="natural set: only the first N people of the split")
        parser.add_argument("--locomo", help="path of locomo10.json (read at run time, never copied)")
        parser.add_argument("--conversations", type=int, help="LoCoMo: only the first N conversations")
        parser.add_argument(
            "--sample", type=int, help="only the first N questions, and the captures of the users they ask (slow paths)"
        )
        parser.add_argument("--llm-url", help="OpenAI-compatible base URL for the worker's extractor")
        parser.add_argument("--llm-model", help="the model name at --llm-url")
        parser.add_argument(
            "--shared-project",
            action="store_true",
            help="everyone in one project (default: a project per person or conversation); shows project-scope leaks",
        )
        parser.add_argument(
            "--consolidate",
            action="store_true",
            help="after capture, ask the questions, consolidate every user through the API, then ask again: "
            "duplicates per 100 memories and stale-first before and after (evaluation/maintenance.py)",
        )
        parser.add_argument("--min-score", type=float, help="send this min_score (default: the service's own cut)")
        parser.add_argument("--threads", type=int, default=2, help="concurrent retrieve clients")
        parser.add_argument("--out", help="also write the JSON report here")
        parser.add_argument(
            "--details", help="write each question's scores and top 5 items here (JSON lines; keep it out of the repo)"
        )
        parser.add_argument("--peer", choices=["mem0"], help="run the plan through the peer instead of MemoryHub")
        parser.add_argument(
            "--peer-python",
            default=os.environ.get(
                "MEMORYHUB_PEER_PYTHON", str(Path(settings.BASE_DIR) / ".memoryhub/peer/bin/python")
            ),
            help="the peer virtualenv's python, as make bench builds it (default: $MEMORYHUB_PEER_PYTHON)",
        )
        parser.add_argument("--peer-harness", default="../shared/peers/mem0_locomo.py", help="the peer's harness")
        parser.add_argument(
            "--peer-thresholds",
            default=f"{MEM0_DEFAULT_THRESHOLD},0",
            help="mem0 search thresholds, comma-separated: one report each (default: mem0's own 0.1, then none)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["dataset"] == "locomo":
            if not options["locomo"]:
                raise CommandError("--dataset locomo needs --locomo PATH (locomo10.json)")
            plan = locomo_plan(
                Path(options["locomo"]), conversations=options["conversations"], sample=options["sample"]
            )
        else:
            plan = natural_plan(
                Path(options["natural"]), split=options["split"], sample=options["sample"], people=options["people"]
            )
        if options["peer"]:
            self._peer(plan, options)
            return
        worker_env: dict[str, str] = {}
        if options["llm_url"]:
            worker_env["MEMORYHUB_LLM_BASE_URL"] = options["llm_url"]
            if options["llm_model"]:
                worker_env["MEMORYHUB_LLM_MODEL"] = options["llm_model"]
            # As docs/guide.md sets it for the local model: a classification on two cores takes
            # longer than the default allows.
            worker_env["MEMORYHUB_CAPTURE_LLM_TIMEOUT"] = os.environ.get(
                "MEMORYHUB_CAPTURE_LLM_TIMEOUT", str(local_llm.CAPTURE_TIMEOUT_S)
            )
        call_command("migrate", interactive=False, verbosity=0)
        # Projects of their own per run: nothing from an earlier run competes in retrieval. One per
        # person (or conversation) unless --shared-project: these people are not one team, and a
        # project-scope memory ("our team deploys to fly.io") would otherwise reach all of them.
        stamp = timezone.now().strftime("%Y%m%d-%H%M%S-%f")
        tenants = sorted(set(plan.tenants.values()))
        keys_by_tenant: dict[str, str] = {}
        project_ids = []
        for tenant in ["shared"] if options["shared_project"] else tenants:
            slug = f"eval-pipeline-{stamp}-{tenant}"[:50]
            project = tenancy.project_get_or_create(slug=slug, team_slug=f"eval-pipeline-{stamp}"[:50])
            project.retrieval_rate_limit = 0  # no limit: an evaluation asks hundreds of questions per user
            project.save(update_fields=["retrieval_rate_limit"])
            keys_by_tenant[tenant] = tenancy.api_key_create(project=project, name="eval_pipeline")[1]
            project_ids.append(project.pk)
        keys = {
            user: keys_by_tenant["shared" if options["shared_project"] else tenant]
            for user, tenant in plan.tenants.items()
        }
        log = self.stderr.write
        extra: dict[str, Any] = {
            "split": options["split"] if plan.dataset == "natural" else None,
            "conversations": options["conversations"] if plan.dataset == "locomo" else None,
            "sample": options["sample"],
            "min_score": options["min_score"],
            "projects": "shared" if options["shared_project"] else "one per person or conversation",
            "llm_model": options["llm_model"] if options["llm_url"] else None,
            "machine": machine.summary(machine.describe()),
        }
        started = time.monotonic()
        with _Service(worker=True, worker_env=worker_env) as service:
            log(f"capturing {sum(len(v) for v in plan.captures.values())} sessions for {len(plan.captures)} users")
            jobs = capture_all(service.call, keys, plan, log=log)
            extra["capture_wall_seconds"] = round(time.monotonic() - started, 1)
            extra["embeddings_wait_seconds"] = _wait_for_embeddings(project_ids)
            extra["profiles"] = rebuild_profiles(service.call, keys, sorted(plan.captures))
            extractors = {j.extractor for j in jobs if j.extractor}
            extra["extractor"] = ",".join(sorted(extractors)) or None
            before: dict[str, Any] = {}
            if options["consolidate"]:
                before = self._consolidate(service, keys, plan, jobs, project_ids, options)
            log(f"asking {len(plan.questions)} questions")
            asked = time.monotonic()
            results = ask_all(
                service.call, keys, plan, jobs, threads=options["threads"], min_score=options["min_score"]
            )
            extra["retrieve_wall_seconds"] = round(time.monotonic() - asked, 1)
        extra["wall_seconds"] = round(time.monotonic() - started, 1)
        report = summarize(plan, jobs, results, extra=extra)
        text = table(report)
        if before:
            stale_first = (before["overall_before"]["stale_first"], report["overall"]["stale_first"])
            report["maintenance"] = {**maintenance.report(stale_first=stale_first, **before["figures"])}
            report["maintenance"]["overall_before"] = before["overall_before"]
            text += "\n" + "\n".join(maintenance.lines(report["maintenance"]))
        self.stdout.write(text)
        line = json.dumps(report)
        if options["details"]:
            with open(options["details"], "w", encoding="utf-8") as handle:
                handle.writelines(json.dumps(row) + "\n" for row in details(results))
        if options["out"]:
            Path(options["out"]).write_text(line + "\n")
        self.stdout.write(line)

    def _consolidate(
        self,
        service: Service,
        keys: dict[str, str],
        plan: Plan,
        jobs: list[JobRecord],
        project_ids: list[int],
        options: dict[str, Any],
    ) -> dict[str, Any]:
        """The questions asked once before consolidation (their scores), every user consolidated
        through the API, and the duplicates before and after."""
        log = self.stderr.write
        log(f"asking {len(plan.questions)} questions before consolidation")
        results = ask_all(service.call, keys, plan, jobs, threads=options["threads"], min_score=options["min_score"])
        duplicates_before = maintenance.duplicates(project_ids)
        log(f"consolidating {len(plan.captures)} users")
        runs = maintenance.consolidate_all(service.call, keys, sorted(plan.captures), log=log)
        figures = {"before": duplicates_before, "after": maintenance.duplicates(project_ids), "consolidation": runs}
        return {"figures": figures, "overall_before": aggregate([score_question(r) for r in results])}

    def _peer(self, plan: Plan, options: dict[str, Any]) -> None:
        if not Path(options["peer_python"]).is_file():
            raise CommandError(f"no peer interpreter at {options['peer_python']}: run `make bench` (it builds it)")
        if not Path(options["peer_harness"]).is_file():
            raise CommandError(f"no peer harness at {options['peer_harness']}")
        thresholds = [float(t) for t in options["peer_thresholds"].split(",") if t.strip()]
        home = Path(os.environ.get("MEMORYHUB_HOME", tempfile.gettempdir()))
        started = time.monotonic()
        output = run_driver(
            plan,
            python=options["peer_python"],
            harness=options["peer_harness"],
            workdir=home / "peer-pipeline",
            thresholds=thresholds,
            log=self.stderr.write,
            llm={"base_url": options["llm_url"], "model": options["llm_model"] or "local"}
            if options["llm_url"]
            else None,
            timeout=6 * 3600,
        )
        wall = round(time.monotonic() - started, 1)
        jobs = peer_jobs(output, plan)
        lines = []
        for threshold in thresholds:
            results = peer_results(output, plan, threshold)
            extra: dict[str, Any] = {
                "split": options["split"] if plan.dataset == "natural" else None,
                "conversations": options["conversations"] if plan.dataset == "locomo" else None,
                "sample": options["sample"],
                "peer": output["system"],
                "peer_versions": output["versions"],
                "peer_store": output["store"],
                "peer_threshold": threshold,
                "peer_network_attempts": output["network_attempts"],
                "extractor": f"{output.get('extractor', 'mem0 infer=False')}, search threshold {threshold}",
                "machine": machine.summary(machine.describe()),
                "wall_seconds": wall,
            }
            report = summarize(plan, jobs, results, extra=extra)
            self.stdout.write(table(report).replace("retrieve ms", "search ms in process (no HTTP)"))
            lines.append(json.dumps(report))
            if options["details"]:
                path = Path(options["details"])
                named = path.with_name(f"{path.stem}-t{threshold}{path.suffix}")
                with open(named, "w", encoding="utf-8") as handle:
                    handle.writelines(json.dumps(row) + "\n" for row in details(results))
        if output["network_attempts"]:
            raise CommandError(f"the peer tried the network: {output['network_attempts'][:5]}")
        if options["out"]:
            Path(options["out"]).write_text("".join(line + "\n" for line in lines))
        self.stdout.write("\n".join(lines))


def _wait_for_embeddings(project_ids: list[int], timeout: float = 600) -> float:
    """Seconds until no memory of the project waits for its embedding (a memory without one
    cannot be found by meaning yet, which would be a different measurement)."""
    started = time.monotonic()
    while Memory.objects.filter(project_id__in=project_ids, embedding_status=EmbeddingStatus.PENDING).exists():
        if time.monotonic() - started > timeout:
            raise CommandError(f"memories still waiting for embeddings after {timeout} s")
        time.sleep(0.5)
    return round(time.monotonic() - started, 1)
