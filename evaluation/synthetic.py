"""Deterministic synthetic memories for benchmarks (never for evaluation: real
quality is measured on LoCoMo and the golden set in ``evaluation/data/``)."""

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


# A larger vocabulary for ``varied_memories``: who, what they did, about what, why and when.
PEOPLE = [
    "The user", "The team", "Maria", "Chen", "Priya", "Tomasz", "Aisha", "Jonas", "Keiko", "Diego",
    "Our backend", "The billing service", "The mobile app", "The data pipeline", "The search API",
    "The support desk", "The design group", "The on-call rotation", "The platform team", "Our CTO",
]  # fmt: skip
ACTIONS = [
    "prefers", "decided to use", "avoids", "migrated to", "standardised on", "is evaluating", "dropped",
    "asked for", "complained about", "recommended", "keeps forgetting", "wants to learn", "switched back to",
    "is allergic to", "signed up for", "budgeted for", "wrote a guide on", "stopped paying for",
]  # fmt: skip
THINGS = [
    *OBJECTS,
    "oat milk in coffee", "a standing desk", "hiking on weekends", "Spanish lessons", "a night-shift schedule",
    "vegetarian lunches", "the 7:40 train", "noise-cancelling headphones", "a shared family calendar",
    "paper notebooks", "the gym near the office", "peanuts", "shellfish", "a four-day week", "remote Fridays",
    "the Lisbon office", "a mechanical keyboard", "two monitors", "audiobooks on the commute",
    "a cat named Pixel", "the quarterly offsite", "Rust for the parser", "SQLite for local caches",
    "Django admin for internal tools", "Grafana dashboards", "a monorepo", "trunk-based development",
    "pair programming on Tuesdays", "a weekly demo", "written design docs", "on-call compensation",
    "a staging environment per branch", "Kafka for change events", "S3 for backups", "nightly load tests",
    "a password manager", "hardware security keys", "Slack huddles", "async stand-ups", "a Friday deploy freeze",
    "Jupyter notebooks", "dbt for the warehouse", "Snowflake", "an internal design system", "Tailwind CSS",
    "server-side rendering", "a mobile-first layout", "accessibility audits", "Sentry for errors",
    "Vim keybindings", "a dark office", "early meetings", "marathon training", "a trip to Japan in April",
    "a mortgage refinance", "piano lessons for the kids", "a gluten-free diet", "decaf after noon",
]  # fmt: skip
WHYS = [
    *REASONS,
    "because the doctor suggested it", "to save money for the wedding", "after the team reorganised",
    "since moving to Porto", "because the contract ends in June", "to sleep better", "after a bad incident",
    "because customers asked for it", "to meet the SOC 2 deadline", "since the new manager joined",
    "because latency doubled", "to help the junior engineers", "after reading a postmortem",
    "because the license got expensive", "to spend more time with family", "since the kids started school",
]  # fmt: skip
WHENS = [
    "", "", "", "last spring", "this quarter", "in 2024", "since January", "every other week", "for now",
    "until the migration ends", "on weekdays", "at the Berlin office", "during the holidays", "from next month",
]  # fmt: skip


def varied_memories(count: int, *, seed: int = 0) -> list[str]:
    """``count`` different one-sentence memories from a larger vocabulary than ``synthetic_sentences``.

    No two are the same sentence, and few differ in one phrase only; ``synthetic_sentences`` makes
    ~8,400 sentences with "(note N)" variants of each, which a vector index keeps as clusters of
    near-identical points (docs/adr/0053-benchmark-method.md).
    """
    rng = random.Random(seed)
    seen: set[str] = set()
    sentences: list[str] = []
    while len(sentences) < count:
        parts = [rng.choice(PEOPLE), rng.choice(ACTIONS), rng.choice(THINGS), rng.choice(WHYS), rng.choice(WHENS)]
        sentence = " ".join(part for part in parts if part) + "."
        if sentence not in seen:
            seen.add(sentence)
            sentences.append(sentence)
    return sentences
