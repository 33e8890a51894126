from __future__ import annotations

from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from threadpoolctl import threadpool_limits

        from conversations import services as conversation_services
        from memories import history
        from retrieval.vectors.memory_vectors import embed_now_or_later
        from retrieval.vectors.message_vectors import queue_for_embedding

        # numpy's BLAS on one thread: its threads keep spinning after each product, and a web
        # process's vector picks (retrieval.vectors.resident_vectors) then cost both cores. 100k memories,
        # 1 client: 38 ms of web CPU a search with two threads, 17.5-20 with one.
        threadpool_limits(limits=1, user_api="blas")
        if embed_now_or_later not in history.after_content_change:
            history.after_content_change.append(embed_now_or_later)
        if queue_for_embedding not in conversation_services.after_messages_stored:
            conversation_services.after_messages_stored.append(queue_for_embedding)
