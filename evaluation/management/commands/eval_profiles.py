"""``manage.py eval_profiles --split dev``: standing-fact questions of the natural set answered by
the profile alone (``evaluation/profiles.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from evaluation.natural import NATURAL_PATH
from evaluation.profiles import run


class Command(BaseCommand):
    help = "Share of the natural set's standing-fact questions answered by the user's profile text alone."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--split", choices=("dev", "heldout", "all"), default="dev")
        parser.add_argument("--show-missed", action="store_true", help="list the questions the profile missed")
        parser.add_argument("--natural", default=str(NATURAL_PATH), help="the natural set's file")

    def handle(self, *args: Any, **options: Any) -> None:
        report = run(split=options["split"], path=Path(options["natural"]), log=self.stdout.write)
        missed = report.pop("missed")
        self.stdout.write(json.dumps(report, indent=2))
        if options["show_missed"]:
            for row in missed:
                self.stdout.write(f"  missed {row['id']}: {row['question']}")
