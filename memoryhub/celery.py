"""The Celery app. Tasks live in each app's ``tasks.py`` (capture jobs; retrieval's embedding and sweeps)."""

from __future__ import annotations

import os
from typing import Any

from celery import Celery
from celery.signals import beat_init, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryhub.settings")

app = Celery("memoryhub")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
@beat_init.connect
def start_servers(**_: Any) -> None:
    """A worker or beat started by hand gets the embedded servers the configuration uses.

    A no-op when the URLs are set, as they are for the children of ``make run`` and of the tests.
    """
    from serving import embedded

    embedded.start_servers()
