"""python manage.py fit_relevance: fit the relevance model and measure how it transfers.

Loads each named evaluation set into its own project (as ``eval_retrieval`` does; --reuse
keeps a loaded one), runs every case through the engine with the cut off (``min_score`` 0),
keeps each candidate's relevance evidence and label, then:

1. leaves each of the --fit sets out in turn: fits on the others, chooses the cut on the
   others' negatives, and reports every set (held-out ones marked) — the transfer table.
   Every cut must also get the product's own examples right (``_required_examples``);
2. fits on all --fit sets and prints the ``RelevanceModel`` to put in ``retrieval/ranking/relevance.py``.

With --keyword-only it does the same for ``relevance.KEYWORD_ONLY``, the model the engine uses
when the embedder is down: on the full-text hits alone, their vector evidence absent (zero),
with no required examples (a paraphrase shares no word with its answer).


Sets: ``golden`` and ``everyday`` (evaluation/data/), ``obs``, ``session``, ``turns`` (LoCoMo, read from
--benchmarks; never copied into the repository).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from django.core.management.base import BaseCommand, CommandParser

from evaluation.datasets import Case, CorpusItem, Dataset
from evaluation.management.commands.eval_retrieval import eval_project, load_dataset
from evaluation.relevance_fit import CaseCandidates, SetCases, evaluate, fit, keyword_only, transfer_table
from retrieval.engine import retrieve
from retrieval.ranking.relevance import FITTED, KEYWORD_ONLY
from retrieval.shapes import RetrieveRequest, Trace

HIKING_EXAMPLE = "Enjoys hiking in the mountains on weekends."
LOCOMO = {"obs": "locomo_obs", "session": "locomo_session", "turns": "locomo"}


class Command(BaseCommand):
    help = "Fit the relevance model on labelled sets; print the leave-one-set-out transfer table."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--fit", default="golden,everyday", help="sets whose labels fit the model")
        parser.add_argument("--report", default="golden,everyday,obs,session", help="sets to report on")
        parser.add_argument("--benchmarks", default="../shared/benchmarks", help="folder of the LoCoMo JSONL")
        parser.add_argument("--every", type=int, default=3, help="LoCoMo: every Nth case (the sets are large)")
        parser.add_argument("--reuse", action="store_true", help="reuse already loaded evaluation projects")
        parser.add_argument("--json", help="also write the table to this file")
        parser.add_argument("--keyword-only", action="store_true", help="fit the model used when the embedder is down")

    def handle(self, *args: Any, **options: Any) -> None:
        names = list(dict.fromkeys([*options["fit"].split(","), *options["report"].split(",")]))
        sets = {name: self._collect(name, options) for name in names}
        required: SetCases | None = self._required_examples()
        shipped_model = FITTED
        if options["keyword_only"]:
            sets = {name: keyword_only(one) for name, one in sets.items()}
            required, shipped_model = None, KEYWORD_ONLY
        fit_sets = [sets[n] for n in options["fit"].split(",")]
        report_sets = [sets[n] for n in options["report"].split(",")]
        table = transfer_table(fit_sets, report_sets, require=required)
        final = fit(fit_sets, require=required)
        shipped = {s.name: evaluate(s, shipped_model) for s in report_sets}
        for fold in table:
            self.stdout.write(f"fit without {fold.held_out}: {fold.model}")
            for name, (figures, held) in fold.figures.items():
                self.stdout.write(f"  {name:9s} {'held-out' if held else 'fitted  '} {_fmt(figures)}")
        self.stdout.write(f"fit on all: {final}")
        for one in report_sets:
            self.stdout.write(f"  {one.name:9s} {_fmt(evaluate(one, final))}")
        self.stdout.write(f"shipped model ({shipped_model}):")
        for name, figures in shipped.items():
            self.stdout.write(f"  {name:9s} {_fmt(figures)}")
        if options["json"]:
            payload = {
                "folds": [
                    {
                        "held_out": fold.held_out,
                        "model": repr(fold.model),
                        "figures": {n: {**vars(f), "held_out": h} for n, (f, h) in fold.figures.items()},
                    }
                    for fold in table
                ],
                "all": repr(final),
            }
            with open(options["json"], "w") as out:
                json.dump(payload, out, indent=1, default=float)

    def _required_examples(self) -> SetCases:
        """The product's own examples every cut must get right: a user whose only
        memory is about hiking asks about outdoor activities (answer it) and about their blood
        type (say nothing)."""
        dataset = Dataset(
            name="required_examples",
            corpus=[CorpusItem(id="hiking", user_id="hiker", text=HIKING_EXAMPLE)],
            cases=[
                Case(
                    id="outdoors",
                    user_id="hiker",
                    query="outdoor activities",
                    category="paraphrase",
                    relevant_ids=("hiking",),
                ),
                Case(
                    id="blood",
                    user_id="hiker",
                    query="What is my blood type?",
                    category="negative",
                    relevant_ids=(),
                    negative=True,
                ),
            ],
        )
        project, ids = eval_project(dataset, reuse=False, log=self.stderr.write)
        return collect("required_examples", dataset, project, {v: k for k, v in ids.items()})

    def _collect(self, name: str, options: dict[str, Any]) -> SetCases:
        dataset_options: dict[str, Any] = {"dataset": name, "limit": None}
        if name in LOCOMO:
            base = f"{options['benchmarks']}/{LOCOMO[name]}"
            dataset_options.update(dataset="locomo", corpus=f"{base}_corpus.jsonl", cases=f"{base}_retrieval.jsonl")
        dataset = load_dataset(dataset_options)
        if name in LOCOMO:
            dataset.cases = dataset.cases[:: options["every"]]
        project, ids = eval_project(dataset, reuse=options["reuse"], log=self.stderr.write)
        self.stderr.write(f"{name}: {len(dataset.cases)} cases")
        return collect(name, dataset, project, {v: k for k, v in ids.items()})


def collect(name: str, dataset: Dataset, project: Any, corpus_id: dict[str, str]) -> SetCases:
    """Every case's candidates with their relevance evidence, through the engine, cut off."""
    result = SetCases(name=name, has_negatives=any(not c.relevant_ids for c in dataset.cases))
    for case in dataset.cases:
        trace = Trace()
        request = RetrieveRequest(
            user_id=case.user_id,
            query=None if case.messages else case.query,
            messages=[{"role": m.role, "content": m.content} for m in case.messages] or None,
            min_score=0,
            limit=50,
            hop_depth=0,
            judge=False,
        )
        retrieve(project=project, request=request, trace=trace)
        found = [c for c in trace.candidates if c.memory_id in trace.evidence]
        ids = [c.memory_id for c in found]
        features = np.array([trace.evidence[i].features for i in ids], dtype=np.float64).reshape(len(ids), -1)
        result.cases.append(
            CaseCandidates(
                features=features,
                ids=[corpus_id.get(i, i) for i in ids],
                relevant=frozenset(case.relevant_ids),
                keyword_hits=np.array([c.keyword_rank is not None for c in found], dtype=bool),
            )
        )
    return result


def _fmt(f: Any) -> str:
    return (
        f"R@5 {f.recall_at_5:.3f} (n {f.answered})  negatives empty {f.negatives_empty:.3f} (n {f.negatives})"
        f"  precision {f.precision:.3f}"
    )
