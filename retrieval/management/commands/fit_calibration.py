"""python manage.py fit_calibration: fit the relevance model on labelled retrieval data.

Runs every case of a dataset (loaded by ``eval_retrieval`` first; see --reuse there)
through the engine with ``min_score`` 0, takes the top candidates' signals with their
labels (relevant or not), fits the logistic calibration and prints the parameters
to put in ``retrieval/calibration.py``. Fit on one dataset, evaluate on another.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memories.models import Project
from retrieval import calibration
from retrieval.engine import RetrieveRequest, Trace, relevance_inputs, retrieve
from retrieval.evaluation.datasets import load_golden, load_locomo


class Command(BaseCommand):
    help = "Fit calibration parameters from a loaded evaluation project's labelled cases."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dataset", choices=["locomo", "golden"], required=True)
        parser.add_argument("--corpus", required=True)
        parser.add_argument("--cases", required=True)
        parser.add_argument("--limit", type=int, default=600, help="cases to use")
        parser.add_argument("--top", type=int, default=20, help="candidates per case")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["dataset"] == "locomo":
            dataset = load_locomo(options["corpus"], options["cases"])
        else:
            dataset = load_golden(options["cases"], memories_path=options["corpus"])
        slug = f"eval-{dataset.name}".lower().replace("_", "-")[:90]
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            raise CommandError(f"load the dataset first: manage.py eval_retrieval (project {slug} missing)")
        corpus_of = {str(pk): cid for cid, pk in project.memories.values_list("metadata__corpus_id", "pk")}
        rows, labels = [], []
        step = max(1, len(dataset.cases) // options["limit"])
        for case in dataset.cases[::step][: options["limit"]]:
            trace = Trace()
            request = RetrieveRequest(user_id=case.user_id, query=case.query, min_score=0, limit=options["top"])
            retrieve(project=project, request=request, trace=trace)
            for candidate in trace.candidates[: options["top"]]:
                rows.append(calibration.features(**relevance_inputs(candidate)))
                labels.append(1.0 if corpus_of.get(candidate.memory_id) in case.relevant_ids else 0.0)
        params = calibration.fit_params(np.array(rows), np.array(labels))
        self.stdout.write(
            json.dumps(
                {"rows": len(rows), "positives": int(sum(labels)), "params": dataclasses.asdict(params)}, indent=1
            )
        )
