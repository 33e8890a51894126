"""The harness benchmarks and drills start the service with (``evaluation.harness.Service``)."""

from __future__ import annotations

import pytest

from evaluation.harness import Service

pytestmark = pytest.mark.slow


def test_a_service_ready_when_answering_has_a_web_worker_answering(servers):
    # What bench_retrieve and bench_mcp wait for: a web worker started and warmed up, whether or
    # not /health is green (no Celery worker here).
    with Service(worker=False, ready="answering") as service:
        assert service.call("GET", "/api/v1/health")[0] in (200, 503)
        assert len(service.pids()["web"]) > 1  # gunicorn's master and its workers


def test_an_unknown_readiness_is_refused():
    with pytest.raises(ValueError, match="readiness"):
        Service(worker=False, ready="soon")
