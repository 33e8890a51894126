"""Sign-in throttling for the curation UI and the Django admin (docs/adr/0019-sign-in-throttling.md).

Failed sign-ins are counted in Redis per (username, client address) over a 15-minute window;
at ``LIMIT`` failures every further attempt for that pair — the right password included — is
refused until the window ends. The check is the authentication backend (Django's model backend behind the check), so it
guards every login form that uses ``django.contrib.auth.authenticate`` (the UI's and the
admin's); counting hangs on the ``user_login_failed`` signal, and a successful sign-in clears
the count. With Redis down, sign-in is not throttled (as the API's rate limit, it fails open).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from typing import Any

import redis
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver
from django.http import HttpRequest

from common.redis import redis_client

log = logging.getLogger(__name__)

LIMIT = 10
WINDOW_SECONDS = 15 * 60


def _key(username: str, request: HttpRequest | None) -> str:
    address = request.META.get("REMOTE_ADDR", "") if request is not None else ""
    digest = hashlib.sha256(f"{username.casefold()}\0{address}".encode()).hexdigest()
    return f"memoryhub:login-failures:{digest}"


def failures(username: str, request: HttpRequest | None) -> int:
    try:
        return int(redis_client().get(_key(username, request)) or 0)
    except redis.RedisError:
        return 0


class ThrottledModelBackend(ModelBackend):
    """Django's model backend that first refuses a username and address with too many failures."""

    def authenticate(
        self, request: HttpRequest | None, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> Any:
        if username and failures(username, request) >= LIMIT:
            log.warning("sign-in refused: too many failures for %r", username)
            raise PermissionDenied("too many failed sign-ins; try again later")
        return super().authenticate(request, username=username, password=password, **kwargs)


@receiver(user_login_failed)
def count_failure(sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any) -> None:
    username = str(credentials.get("username") or "")
    if not username:
        return
    try:
        pipe = redis_client().pipeline()
        pipe.incr(_key(username, request))
        pipe.expire(_key(username, request), WINDOW_SECONDS)
        pipe.execute()
    except redis.RedisError:
        log.warning("sign-in failures not counted: Redis unavailable")


@receiver(user_logged_in)
def clear_failures(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    with contextlib.suppress(redis.RedisError):
        redis_client().delete(_key(user.get_username(), request))
