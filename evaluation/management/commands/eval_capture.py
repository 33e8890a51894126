"""python manage.py eval_capture: what capture writes, measured on hand-written conversations.

Runs every case of ``evaluation/data/capture/cases.jsonl`` through the real capture pipeline (see
``evaluation.capture``) on one path: ``rules`` (no LLM, whatever is configured) or ``llm``
(the configured ``MEMORYHUB_LLM_BASE_URL`` / ``OPENAI_API_KEY``). Prints a table of the
figures for the whole set, the tune split and the held-out split, and writes every figure
and every case's details to ``<report-dir>/capture-<path>.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.test import override_settings

from evaluation import capture as evaluation
from evaluation import capture_scores as scoring
from retrieval.llm import llm_configured

NO_LLM = (
    "--path llm needs an LLM and none is configured: set MEMORYHUB_LLM_BASE_URL (an OpenAI-compatible "
    "server, e.g. the local model of `make run-llm`) or OPENAI_API_KEY."
)


class Command(BaseCommand):
    help = "Score capture (rule-based or LLM path) on the hand-written capture set; JSON report + table."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--path", choices=["rules", "llm"], default="rules", help="which extractor to evaluate")
        parser.add_argument("--cases", default="evaluation/data/capture/cases.jsonl", help="cases JSONL")
        parser.add_argument("--limit", type=int, help="only the first N cases")
        parser.add_argument("--split", choices=["all", *evaluation.SPLITS], default="all", help="only this split")
        parser.add_argument("--policy", choices=["auto", "review"], default="auto", help="the projects' capture policy")
        parser.add_argument("--threshold", type=float, default=scoring.MATCH_THRESHOLD, help="cosine to match")
        parser.add_argument("--report-dir", default="reports", help="folder for the JSON report")
        parser.add_argument("--keep", action="store_true", help="keep the evaluation projects for inspection")
        parser.add_argument(
            "--check-threshold",
            metavar="PAIRS",
            help="only print how labelled pairs (evaluation/data/capture/threshold_pairs.jsonl) fare at --threshold",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["check_threshold"]:
            self._check_threshold(options["check_threshold"], options["threshold"])
            return
        cases = evaluation.load_cases(options["cases"])
        if options["split"] != "all":
            cases = [c for c in cases if c.split == options["split"]]
        cases = cases[: options["limit"]] if options["limit"] else cases
        if options["path"] == "llm":
            if not llm_configured():
                raise CommandError(NO_LLM)
            overrides: dict[str, Any] = {}
        else:
            overrides = {"MEMORYHUB_LLM_BASE_URL": "", "OPENAI_API_KEY": ""}
        started = time.monotonic()
        try:
            with override_settings(**overrides):
                runs = evaluation.run_cases(cases, policy=options["policy"], log=self.stderr.write)
            scores = scoring.score_runs(runs, threshold=options["threshold"])
        finally:
            if not options["keep"]:
                evaluation.fresh_projects()
        summary = scoring.report(scores, threshold=options["threshold"])
        summary["run"] = {
            "path": options["path"],
            "model": settings.MEMORYHUB_LLM_MODEL if options["path"] == "llm" else None,
            "policy": options["policy"],
            "cases_file": options["cases"],
            "split": options["split"],
            "seconds": round(time.monotonic() - started, 1),
            "date": time.strftime("%Y-%m-%d %H:%M"),
        }
        out = Path(options["report_dir"])
        out.mkdir(parents=True, exist_ok=True)
        target = out / f"capture-{options['path']}.json"
        target.write_text(json.dumps(summary, indent=1, default=str))
        self.stdout.write(f"capture evaluation, path {options['path']} (match: cosine >= {options['threshold']})")
        self.stdout.write(scoring.table(summary))
        self.stdout.write(f"report: {target}")

    def _check_threshold(self, path: str, threshold: float) -> None:
        rows = scoring.threshold_check(path, threshold)
        for row in sorted(rows, key=lambda r: -r["similarity"]):
            verdict = "match" if row["matched"] else "-"
            line = f"{row['similarity']:.3f} {row['label']:9} {verdict:5} {row['expected']} || {row['produced']}"
            self.stdout.write(line)
        for label in ("same", "different"):
            group = [r for r in rows if r["label"] == label]
            self.stdout.write(f"{label}: {sum(r['matched'] for r in group)}/{len(group)} matched at {threshold}")
