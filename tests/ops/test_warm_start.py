"""Warm start: a gunicorn worker loads models and walks the request path before its first request."""

from __future__ import annotations

import gc

import pytest

from memories.models import ApiKey
from retrieval.embedding.embedders import embedder_for_model, reset_embedder_cache
from retrieval.embedding.local_embedder import LOCAL_MODEL_NAME
from retrieval.models import RetrievalLog


@pytest.mark.django_db(transaction=True)
def test_worker_warm_up_walks_the_request_path_and_writes_nothing(api, django_assert_max_num_queries):
    from serving import gunicorn_conf

    reset_embedder_cache(include_local=True)  # a fresh worker: no session loaded yet
    keys_before = list(ApiKey.objects.values_list("pk", "last_used_at"))
    gc.unfreeze()
    try:
        with django_assert_max_num_queries(10) as captured:
            gunicorn_conf.post_worker_init(worker=None)
        # What it built is left out of the garbage collector's full collections.
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
    # The int8 session every text runs on is built before the first request (~0.4 s to rewrite
    # and load: a worker's first retrieve took 301-475 ms when it was not).
    # So is the one a question takes (MEMORYHUB_QUERY_THREADS).
    embedder = embedder_for_model(LOCAL_MODEL_NAME)
    assert {(1, True), (embedder.query_threads(), True)} <= set(embedder._loaded)
    statements = " ".join(query["sql"] for query in captured.captured_queries)
    assert "memories_apikey" in statements  # the key lookup ran (and found nothing)
    assert "query_lexemes" in statements  # so did the hybrid statement
    assert list(ApiKey.objects.values_list("pk", "last_used_at")) == keys_before
    assert not RetrievalLog.objects.exists()
