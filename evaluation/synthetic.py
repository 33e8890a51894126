"""Deterministic synthetic memories for benchmarks (never for evaluation: real
quality is measured on LoCoMo and the golden set in ``eval/``)."""

from __future__ import annotations

import random

SUBJECTS = ["The user", "The team", "Our backend", "The billing service", "The mobile app", "The data pipeline"]
VERBS = ["prefers", "decided to use", "avoids", "migrated to", "standardised on", "is evaluating", "dropped"]
OBJECTS = [
    "PostgreSQL for the event store",
    "tabs for indentation",
    "ruff for linting",
    "Celery for background jobs",
    "GraphQL for the public API",
    "feature flags for risky releases",
    "Terraform for infrastructure",
    "pytest fixtures over setUp methods",
    "short-lived branches",
    "OpenTelemetry for tracing",
    "Redis as a cache",
    "gRPC between services",
    "blue-green deployments",
    "semantic versioning",
    "dark mode in every editor",
    "type hints on public functions",
    "Kubernetes on bare metal",
    "weekly dependency updates",
    "squash merges",
    "structured JSON logging",
]
REASONS = [
    "because reviews got faster",
    "after the outage in March",
    "to cut cloud costs",
    "since the audit",
    "for better onboarding",
    "to simplify on-call",
    "after a long design review",
    "to match the platform team",
    "because the old tool was unmaintained",
    "to reduce flaky tests",
]


def synthetic_sentences(count: int, *, seed: int = 0, tag: str = "") -> list[str]:
    """``count`` plausible one-sentence memories; ``tag`` makes them unique per run."""
    rng = random.Random(seed)
    sentences = []
    for index in range(count):
        sentence = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(REASONS)}"
        sentences.append(f"{sentence} (note {tag}{index}).")
    return sentences
