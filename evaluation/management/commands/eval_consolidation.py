"""python manage.py eval_consolidation: consolidation's precision and recall, and its throughput.

Without options: every pair of ``evaluation/data/consolidation/pairs.jsonl`` judged by the rules the runs use
(with the configured embedder's cosine), precision and recall of merge + supersede on the ``dev``
and ``heldout`` splits separately (a wrong merge counts double), and the dev pairs it got wrong.
``--throughput``: a synthetic end user of ``--memories`` memories in a project of its own, a full
run, then an incremental run after ``--new`` more, in one sitting (docs/adr/0095-consolidation-measured.md).
``--observations`` (an LLM configured): the observations one run per user of the everyday set proposes,
each with the memories it cites, to read (``consolidation-observations.json``).
Writes the figures to ``<report-dir>/consolidation.json`` (and ``consolidation-throughput.json``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluation import consolidation as evaluation
from memories import tenancy
from memories.models import CapturePolicy, Project
from retrieval.llm import llm_configured


class Command(BaseCommand):
    help = "Consolidation on the labelled pairs (precision/recall per split) and, with --throughput, its speed."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--pairs", default="evaluation/data/consolidation/pairs.jsonl", help="labelled pairs (JSONL)"
        )
        parser.add_argument("--report-dir", default="reports", help="folder for the JSON report")
        parser.add_argument("--throughput", action="store_true", help="measure a full and an incremental run")
        parser.add_argument("--memories", type=int, default=10_000, help="the synthetic user's memories")
        parser.add_argument("--new", type=int, default=50, help="memories added before the incremental run")
        parser.add_argument("--keep", action="store_true", help="keep the synthetic user for inspection")
        parser.add_argument(
            "--observations",
            action="store_true",
            help="with an LLM configured: the observations runs propose for the everyday set's users",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        report_dir = Path(options["report_dir"])
        report_dir.mkdir(parents=True, exist_ok=True)
        if options["throughput"]:
            self._throughput(options, report_dir)
            return
        if options["observations"]:
            self._observations(report_dir)
            return
        report = evaluation.evaluate_pairs(evaluation.load_pairs(options["pairs"]))
        (report_dir / "consolidation.json").write_text(json.dumps(report, indent=2, ensure_ascii=False))
        self.stdout.write(f"embedder {report['embedder']}; merge + supersede, a wrong merge counted twice")
        self.stdout.write(f"{'split':8} {'pairs':>5} {'precision':>9} {'recall':>6} {'right':>5} {'wrong':>5}")
        for split, figures in report["splits"].items():
            self.stdout.write(
                f"{split:8} {figures['pairs']:>5} {figures['precision']:>9.3f} {figures['recall']:>6.3f} "
                f"{figures['right']:>5} {figures['wrong']:>5}"
            )
        wrong = [p for p in report["pairs"] if p["split"] == "dev" and p["label"] != p["predicted"]]
        if wrong:
            self.stdout.write("\ndev pairs judged otherwise than labelled:")
        for pair in wrong:
            self.stdout.write(
                f"  {pair['id']}: {pair['label']} -> {pair['predicted']} (cosine {pair['cosine']:.3f}) "
                f"{pair['older']!r} / {pair['newer']!r}"
            )
        self.stdout.write(f"\nreport: {report_dir / 'consolidation.json'}")

    def _observations(self, report_dir: Path) -> None:
        if not llm_configured():
            raise CommandError("observations need an LLM: set MEMORYHUB_LLM_BASE_URL (make run-llm) or OPENAI_API_KEY")
        project = tenancy.project_get_or_create(slug="eval-observations", team_slug="eval-observations")
        Project.objects.filter(pk=project.pk).update(capture_policy=CapturePolicy.REVIEW)
        project.refresh_from_db()
        figures = evaluation.observation_figures(project=project)
        (report_dir / "consolidation-observations.json").write_text(json.dumps(figures, indent=2, default=str))
        for run in figures["runs"]:
            self.stdout.write(f"{run['user_id']}: {run['memories']} memories, {run['seconds']} s, {run['status']}")
        for observation in figures["observations"]:
            self.stdout.write(
                f"\n[{observation['user_id']}] {observation['content']}  (grounded {observation['grounded']})"
            )
            for text in observation["cited"]:
                self.stdout.write(f"    cites: {text}")
        self.stdout.write(
            f"\n{len(figures['observations'])} observations from {figures['memories']} memories of {figures['users']} "
            f"users; cites {figures['cited_mean']} memories on average; grounded mean {figures['grounded_mean']}, "
            f"min {figures['grounded_min']}"
        )

    def _throughput(self, options: dict[str, Any], report_dir: Path) -> None:
        project = tenancy.project_get_or_create(slug="eval-consolidation", team_slug="eval-consolidation")
        figures = evaluation.measure_throughput(project=project, memories=options["memories"], new=options["new"])
        if not options["keep"]:
            evaluation.remove_user(project=project, user_id=figures["user_id"])
        (report_dir / "consolidation-throughput.json").write_text(json.dumps(figures, indent=2, default=str))
        full, incremental = figures["full"], figures["incremental"]
        self.stdout.write(f"{figures['machine']}; load average {figures['load_average']}")
        self.stdout.write(f"{figures['memories']} memories stored in {figures['store_s']} s")
        for name, run in (("full", full), ("incremental", incremental)):
            self.stdout.write(
                f"{name:12} {run['seconds']:>8.3f} s  {run['compared']:>6} compared  "
                f"{run['memories_per_s'] or 0:>8.1f} memories/s  {run['counts']}  {run['timings']}"
            )
        self.stdout.write(
            f"incremental after {figures['new']} new memories: {figures['incremental_share']:.2%} of the full run; "
            f"{figures['incremental_cold_share']:.2%} by a worker holding none of the user's vectors "
            f"(their whole read {figures['whole_vector_read_s']:.3f} s)"
        )
        planted = figures["planted"]
        self.stdout.write(
            f"against the generator's meanings: {planted['acted']} actions, {planted['right']} right "
            f"(precision {planted['precision']:.3f}); {planted['repeated_facts']} facts said twice, "
            f"merge recall {planted['merge_recall']:.3f}"
        )
        for example in planted["wrong_examples"]:
            self.stdout.write(f"  wrong: {example}")
        self.stdout.write(f"report: {report_dir / 'consolidation-throughput.json'}")
