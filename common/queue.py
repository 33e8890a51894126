"""Publishing Celery tasks by name, once, without waiting for a broker that is down.

Services queue work through here and never import a tasks module: a task is named by the
string it is registered under (every task pins ``name=``; ``tests/ops/test_task_names.py``
lists them), so the layer that publishes does not depend on the layer that runs it. The app is
Celery's current one: ``memoryhub.celery``'s, made when Django loads the project package.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import redis
from celery import current_app as app
from kombu.exceptions import OperationalError as BrokerError

log = logging.getLogger(__name__)

# What publishing to a broker that is down raises: kombu's wrapper, or the raw socket/Redis error.
BROKER_DOWN = (BrokerError, OSError, redis.RedisError)
# One attempt, no publish retries. Not ``retry=False``: kombu then connects through
# ``Connection.default_channel``, which keeps trying at 2 s intervals until the 4 s connect
# timeout (6 s per publish against a dead broker, measured with kombu 5.7); ``.delay``'s default
# policy retries for 0.6 s; this policy fails at once.
NO_PUBLISH_RETRIES: dict[str, Any] = {"retry": True, "retry_policy": {"max_retries": 0}}


def publish(task_name: str, args: tuple[Any, ...], *, waiting: str, countdown: float | None = None) -> bool:
    """Send the task registered as ``task_name`` once, without publish retries; whether it was sent.

    A caller may be a web request: it must not wait for a broker that is down. Every caller
    has a sweeper that queues later what could not be sent now; ``waiting`` says what waits
    for which sweeper, for the warning logged when the broker is down.
    """
    try:
        app.send_task(task_name, args, countdown=countdown, **NO_PUBLISH_RETRIES)
    except BROKER_DOWN as error:
        log.warning("broker unavailable (%s); %s", error, waiting)
        return False
    return True


def publish_chunks(task_name: str, ids: Sequence[str], chunk: int, *, waiting: str) -> None:
    """Send ``task_name`` once per ``chunk`` ids, stopping at the first that cannot be sent."""
    for start in range(0, len(ids), chunk):
        if not publish(task_name, (list(ids[start : start + chunk]),), waiting=waiting):
            return
