"""The demo workspace ``make run`` creates on first start, so the UI and API show
something at once: a team, a project, an admin login, an API key, and a few dozen
memories of a fictional user (``demo-user``) of a coding assistant."""

from __future__ import annotations

# Retrievals per end user per minute in the demo project. A person exploring the playground,
# the API docs and the MCP tools by hand must never meet the production default (10, the
# model's default for every other project), which is sized for an agent's turns.
DEMO_RATE_LIMIT = 600

# (content, kind, category, scope)
DEMO_MEMORIES: list[tuple[str, str, str, str]] = [
    (
        "The user prefers tabs over spaces in Go code and four spaces in Python.",
        "preference",
        "coding-preferences",
        "user",
    ),
    (
        "The user writes commit messages in the imperative mood with a short subject line.",
        "preference",
        "coding-preferences",
        "user",
    ),
    ("The user likes small pull requests that each do one thing.", "preference", "coding-preferences", "user"),
    ("The user prefers pytest fixtures over unittest setUp methods.", "preference", "coding-preferences", "user"),
    (
        "The user dislikes ORMs hiding N+1 queries and asks for query counts in tests.",
        "preference",
        "coding-preferences",
        "user",
    ),
    ("The user prefers type hints on every public function.", "preference", "coding-preferences", "user"),
    ("The user wants explanations before large refactors, not after.", "preference", "coding-preferences", "user"),
    ("The user uses Neovim with the LSP for Python and Go.", "fact", "user-facts", "user"),
    (
        "The user's name is Dana Okafor and they are a backend engineer at Northwind Logistics.",
        "fact",
        "user-facts",
        "user",
    ),
    ("The user works in the Europe/Berlin time zone.", "fact", "user-facts", "user"),
    ("The user is on call every second week, starting on Mondays.", "fact", "user-facts", "user"),
    ("The user's laptop runs Debian 12 with Python 3.11.", "fact", "user-facts", "user"),
    ("The user is learning Rust in their spare time.", "fact", "user-facts", "user"),
    ("The user maintains the billing service and the invoice PDF renderer.", "fact", "user-facts", "user"),
    (
        "The team formats Python with ruff format and lints with ruff check.",
        "decision",
        "project-conventions",
        "project",
    ),
    (
        "The team's branches are named <ticket>-<short-description>, e.g. NW-142-retry-webhooks.",
        "decision",
        "project-conventions",
        "project",
    ),
    (
        "All database migrations must be backwards compatible for one release.",
        "decision",
        "project-conventions",
        "project",
    ),
    ("Every service exposes /healthz and /metrics endpoints.", "decision", "project-conventions", "project"),
    (
        "Secrets live in the vault; never in environment files committed to git.",
        "decision",
        "project-conventions",
        "project",
    ),
    ("Code review needs one approval, two for changes to payments code.", "decision", "project-conventions", "project"),
    (
        "The team chose PostgreSQL as the event store instead of Kafka.",
        "decision",
        "architectural-decisions",
        "project",
    ),
    ("Background jobs run on Celery with Redis as the broker.", "decision", "architectural-decisions", "project"),
    ("The public API is versioned in the URL path (/api/v1).", "decision", "architectural-decisions", "project"),
    (
        "Invoices are rendered to PDF with WeasyPrint in a separate worker queue.",
        "decision",
        "architectural-decisions",
        "user",
    ),
    (
        "The billing service talks to Stripe only through the payments gateway module.",
        "decision",
        "architectural-decisions",
        "project",
    ),
    ("The user corrected: the staging database is staging-db-2, not staging-db-1.", "fact", "corrections", "user"),
    ("The user corrected: deploys happen on Tuesdays and Thursdays, not Fridays.", "fact", "corrections", "project"),
    ("Retries for webhooks use exponential backoff capped at one hour.", "note", "patterns", "project"),
    (
        "Idempotency keys are stored for 24 hours on every POST endpoint of the billing API.",
        "note",
        "patterns",
        "project",
    ),
    ("Flaky tests are quarantined with a ticket number, never deleted.", "note", "patterns", "project"),
    ("The invoice renderer times out on documents over 200 pages.", "note", "finding", "user"),
    ("Slow invoice runs correlate with the nightly backup window.", "note", "insight", "user"),
    ("Run the migration linter before opening a pull request that touches models.", "note", "lesson", "user"),
    ("The N+1 query in the invoice list was fixed with prefetch_related on line items.", "note", "finding", "user"),
]

# (index of the old memory, successor content): demo supersede chains.
DEMO_SUPERSEDES: list[tuple[int, str]] = [
    (7, "The user switched from Neovim to Helix for Python and Go."),
]

# (from index, to index, relationship)
DEMO_LINKS: list[tuple[int, int, str]] = [
    (30, 31, "related"),
    (31, 32, "derived_from"),
    (13, 23, "related"),
    (21, 27, "related"),
    (33, 4, "refines"),
]

# Memories waiting in the review queue, as capture would propose them.
DEMO_PENDING: list[tuple[str, str, str, str]] = [
    ("The user prefers dark mode in every tool.", "preference", "coding-preferences", "user"),
    ("The team decided to adopt OpenTelemetry for tracing.", "decision", "architectural-decisions", "project"),
    ("The user wants error messages to name the file and line.", "preference", "coding-preferences", "user"),
]
