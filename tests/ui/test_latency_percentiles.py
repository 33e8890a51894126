"""The dashboard and the Retrievals page compute latency percentiles with one function, so the
same retrievals give the same p95 on both."""

from __future__ import annotations

import re

import numpy as np
import pytest

from retrieval.models import RetrievalLog
from ui.selectors import latency_percentiles

pytestmark = pytest.mark.django_db

# 18 retrievals: most quick, a cold first one and a slow outlier, as a demo's first session looks.
LATENCIES = [3100.0, 66.0, *(float(n) for n in range(19, 35))]


def logged(project) -> None:
    for i, latency in enumerate(LATENCIES):
        RetrievalLog.objects.create(
            project=project, user_id="alice", correlation_id=str(i), query_hash="h", latency_ms=latency
        )


def test_latency_percentiles_interpolate_as_numpy_does(project):
    logged(project)
    figures = latency_percentiles(RetrievalLog.objects.filter(project=project))
    assert figures["n"] == 18
    assert figures["p50"] == pytest.approx(np.percentile(LATENCIES, 50))
    assert figures["p95"] == pytest.approx(np.percentile(LATENCIES, 95))


def test_latency_percentiles_of_no_retrievals_are_none(project):
    assert latency_percentiles(RetrievalLog.objects.filter(project=project)) == {"p50": None, "p95": None, "n": 0}


def test_the_dashboard_and_the_retrievals_page_agree_on_p95(client_as, project):
    logged(project)
    client = client_as("viewer")
    dashboard = client.get(f"/p/{project.slug}/").content.decode()
    retrievals = client.get(f"/p/{project.slug}/retrievals/").content.decode()
    expected = f"p95 {np.percentile(LATENCIES, 95):.0f} ms"
    assert re.search(r'id="p95">(p95 \d+ ms)', dashboard)[1] == expected
    assert re.findall(r"p95 \d+ ms", retrievals) == [expected, expected]  # the chart's label and its aria-label
