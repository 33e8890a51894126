"""Schema fuzzing: Schemathesis over /api/v1/openapi.json, every operation.

Cases come from the published OpenAPI schema and go through the whole Django stack in process
(WSGI: middleware, auth, row security, the real Postgres and Redis) with a valid project key.
Checks: no server error, status codes and content types the schema documents, bodies that
match the documented response schema, and every 4xx in the error envelope.

``SCHEMA_FUZZ_EXAMPLES`` sets the examples per operation: 4 in ``make test`` (the quick
profile), more in ``make fuzz`` (the deep one).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, settings
from schemathesis.specs.openapi import checks

from memories import tenancy
from memories.models import Project

EXAMPLES = int(os.environ.get("SCHEMA_FUZZ_EXAMPLES", "4"))

# /health answers 503 by design when a dependency is down (the suite's own database check
# runs on a connection the test transaction holds); its contract is tested in tests/ops.
# POST /import takes JSON lines (text): sent as the text it is.
schemathesis.serializer.alias("application/x-ndjson", "text/plain")

schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", get_wsgi_application()).exclude(path="/api/v1/health")


CALLS: dict[int, int] = {}


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    """Print the counts at the end (``make fuzz`` quotes them)."""
    yield
    total = sum(CALLS.values())
    print(f"\nschema fuzz: {total} cases, {EXAMPLES} examples per operation, statuses {dict(sorted(CALLS.items()))}")


@pytest.fixture
def key(db: None) -> Iterator[str]:
    project = tenancy.project_get_or_create(slug="schema-fuzz", team_slug="schema-fuzz")
    Project.objects.filter(pk=project.pk).update(retrieval_rate_limit=0)
    _, plain = tenancy.api_key_create(project=project, name="fuzz")
    # As Django's test client does: the request must not close the test's connection.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield plain
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_keeps_its_documented_contract(case, key):
    response = case.call_and_validate(
        headers={"Authorization": f"Bearer {key}"},
        # A request the schema allows may still break a business rule (an unknown category, a
        # memory id that does not exist, empty content): a 4xx there is the contract, not a bug.
        excluded_checks=[checks.positive_data_acceptance],
    )
    CALLS[response.status_code] = CALLS.get(response.status_code, 0) + 1
    if response.status_code >= 400:
        body = json.loads(response.content)
        error = body.get("error") if isinstance(body, dict) else None
        assert isinstance(error, dict) and {"code", "message"} <= set(error), response.content[:300]
