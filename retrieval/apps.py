from __future__ import annotations

from django.apps import AppConfig


class RetrievalConfig(AppConfig):
    name = "retrieval"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from conversations import services as conversation_services
        from memories import services
        from retrieval.memory_vectors import embed_now_or_later
        from retrieval.message_vectors import queue_for_embedding

        if embed_now_or_later not in services.after_content_change:
            services.after_content_change.append(embed_now_or_later)
        if queue_for_embedding not in conversation_services.after_messages_stored:
            conversation_services.after_messages_stored.append(queue_for_embedding)
