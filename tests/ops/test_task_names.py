"""Task names are part of the wire format: queued messages and the beat schedule name tasks.

Modules move (DESIGN notes, "Layers"); the names a task is published and scheduled under do
not. Every task pins its ``name=``; this list is what a deployed broker may still hold.
"""

from __future__ import annotations

from django.conf import settings

from memoryhub.celery import app

PUBLISHED_NAMES = {
    "capture.tasks.capture_job_task",
    "capture.tasks.sweep_capture_jobs",
    "capture.tasks.embed_memories_task",
    "capture.tasks.sweep_embeddings",
    "capture.tasks.reembed_project_task",
    "capture.tasks.drop_old_vectors_task",
    "capture.tasks.embed_messages_task",
    "capture.tasks.sweep_message_embeddings",
    "retrieval.tasks.refresh_keyword_stats_task",
    "retrieval.tasks.build_vector_index_task",
    "consolidation.tasks.consolidation_run_task",
    "consolidation.tasks.schedule_consolidations",
    "profiles.tasks.rebuild_profiles_task",
}


def test_every_published_task_name_is_still_registered():
    app.loader.import_default_modules()
    ours = {name for name in app.tasks if not name.startswith("celery.")}
    assert ours >= PUBLISHED_NAMES, PUBLISHED_NAMES - ours


def test_the_beat_schedule_names_only_registered_tasks():
    app.loader.import_default_modules()
    for entry, schedule in settings.CELERY_BEAT_SCHEDULE.items():
        assert schedule["task"] in app.tasks, entry
