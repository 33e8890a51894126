"""Warm start: a gunicorn worker loads models and walks the request path before its first request."""

from __future__ import annotations

import pytest

from memories.models import ApiKey
from retrieval.models import RetrievalLog


@pytest.mark.django_db(transaction=True)
def test_worker_warm_up_walks_the_request_path_and_writes_nothing(api, django_assert_max_num_queries):
    from memoryhub import gunicorn_conf

    keys_before = list(ApiKey.objects.values_list("pk", "last_used_at"))
    with django_assert_max_num_queries(10) as captured:
        gunicorn_conf.post_worker_init(worker=None)
    statements = " ".join(query["sql"] for query in captured.captured_queries)
    assert "memories_apikey" in statements  # the key lookup ran (and found nothing)
    assert "query_lexemes" in statements  # so did the hybrid statement
    assert list(ApiKey.objects.values_list("pk", "last_used_at")) == keys_before
    assert not RetrievalLog.objects.exists()
