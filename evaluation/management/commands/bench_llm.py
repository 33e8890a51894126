"""python manage.py bench_llm: how fast the configured LLM endpoint is, and whether it answers in JSON.

Three measurements against ``MEMORYHUB_LLM_BASE_URL`` (e.g. the local model of ``make run-llm``):

- generation: short prompts answered with up to ``--gen-tokens`` tokens; completion tokens / s;
- prompt processing: prompts of about ``--prompt-tokens`` tokens answered with one token; prompt
  tokens / s (each prompt starts differently, so a server's prefix cache cannot skip the work);
- classification: the capture classifier's real prompt and JSON schema on ``--runs`` turns from the
  capture evaluation set; wall time per call and how many answers were usable JSON (parsed by the
  same tolerant parser capture uses) and how many items validation then refused.

Token counts come from the server's ``usage``. Prints a table and ends with one JSON line.
"""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from capture.classifier import (
    ClassifierOutputError,
    build_classifier_messages,
    classifier_schema,
    parse_classifier_output,
    validate_items,
)
from conversations.window import clean_window
from evaluation.capture import load_cases
from memories.models import DEFAULT_TAXONOMY
from retrieval.llm import complete, llm_configured, openai_client

FILLER = (
    "The team keeps its services in one repository, reviews every change, deploys twice a week and "
    "writes down each decision with its reason so that newcomers can follow why things are as they are. "
)


class Command(BaseCommand):
    help = "Tokens/s, classification wall time and JSON validity of the configured LLM endpoint."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--runs", type=int, default=30, help="classification calls (capture set turns)")
        parser.add_argument("--speed-runs", type=int, default=5, help="generation and prompt calls each")
        parser.add_argument("--gen-tokens", type=int, default=128)
        parser.add_argument("--prompt-tokens", type=int, default=1200)
        parser.add_argument("--cases", default="evaluation/data/capture/cases.jsonl")

    def handle(self, *args: Any, **options: Any) -> None:
        if not llm_configured():
            raise CommandError("no LLM configured: set MEMORYHUB_LLM_BASE_URL (e.g. `make run-llm`) or OPENAI_API_KEY")
        model = settings.MEMORYHUB_LLM_MODEL
        client = openai_client(base_url=settings.MEMORYHUB_LLM_BASE_URL, api_key=settings.OPENAI_API_KEY)
        generation = [
            self._rate(client, model, f"Run {n}: write a short paragraph about keeping notes.", options["gen_tokens"])
            for n in range(options["speed_runs"])
        ]
        words = options["prompt_tokens"] * 3 // 4
        filler = " ".join((FILLER * (words // 30 + 1)).split()[:words])
        prompts = [
            self._rate(client, model, f"Note {n} ({time.time_ns()}): {filler}\nAnswer OK.", 1, prompt=True)
            for n in range(options["speed_runs"])
        ]
        classification = self._classify(model, load_cases(options["cases"]), options["runs"])
        result = {
            "model": model,
            "base_url": settings.MEMORYHUB_LLM_BASE_URL,
            "generation_tokens_per_s": _summary(generation),
            "prompt_tokens_per_s": _summary(prompts),
            **classification,
        }
        self.stdout.write(_table(result))
        self.stdout.write(json.dumps(result))

    def _rate(self, client: Any, model: str, text: str, max_tokens: int, *, prompt: bool = False) -> float:
        started = time.perf_counter()
        response = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": text}],
            max_tokens=max_tokens,
            temperature=0,
            timeout=600,
        )
        seconds = time.perf_counter() - started
        usage = response.usage
        tokens = usage.prompt_tokens if prompt else usage.completion_tokens
        return float(tokens) / seconds

    def _classify(self, model: str, cases: list[Any], runs: int) -> dict[str, Any]:
        turns = [c for c in cases if c.messages][:runs]
        seconds: list[float] = []
        usable = items = refused = 0
        for case in turns:
            window = clean_window(case.messages, max_chars=settings.MEMORYHUB_CAPTURE_WINDOW_CHARS)
            messages = build_classifier_messages(window=window, existing=[], taxonomy=DEFAULT_TAXONOMY)
            schema = classifier_schema(taxonomy=DEFAULT_TAXONOMY, visible_ids=set())
            started = time.perf_counter()
            text = complete(messages, model=model, timeout=600, json_schema=schema)
            seconds.append(time.perf_counter() - started)
            try:
                parsed = parse_classifier_output(text)
            except ClassifierOutputError:
                continue
            usable += 1
            accepted, rejected = validate_items(parsed, taxonomy=DEFAULT_TAXONOMY, visible_ids=set())
            items += len(accepted) + len(rejected)
            refused += len(rejected)
        return {
            "classification_calls": len(turns),
            "classification_seconds": _summary(seconds),
            "usable_json": usable,
            "items_proposed": items,
            "items_refused": refused,
        }


def _summary(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"median": None, "p95": None, "min": None, "max": None}
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "median": round(statistics.median(values), 2),
        "p95": round(p95, 2),
        "min": round(ordered[0], 2),
        "max": round(ordered[-1], 2),
    }


def _table(result: dict[str, Any]) -> str:
    gen, prompt = result["generation_tokens_per_s"], result["prompt_tokens_per_s"]
    calls = result["classification_seconds"]
    return "\n".join(
        [
            f"LLM benchmark: {result['model']} at {result['base_url']}",
            f"  generation tokens/s      median {gen['median']}  (min {gen['min']}, max {gen['max']})",
            f"  prompt tokens/s          median {prompt['median']}  (min {prompt['min']}, max {prompt['max']})",
            f"  classification seconds   median {calls['median']}  p95 {calls['p95']}  max {calls['max']}",
            f"  usable JSON answers      {result['usable_json']} / {result['classification_calls']}",
            f"  items proposed / refused {result['items_proposed']} / {result['items_refused']}",
        ]
    )
