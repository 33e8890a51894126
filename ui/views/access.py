"""The one place the UI checks who may do what, and the helpers every view shares.

``project_view`` loads the project by slug for the signed-in person: a non-member
gets 404 (the project might as well not exist), a member below the needed role
gets 403, and a ``NotFound`` the view lets through (a selector's) is a 404. Safe
methods need ``read``; any other method needs ``write``, which is the reviewer role
unless the view says otherwise (a view that must accept a viewer's POST names
``write=Role.VIEWER`` explicitly).

Pages that answer htmx with a fragment depend on the ``HX-Request`` header, so every
project view's response says ``Vary: HX-Request``; a history restore (htmx asking for a
whole page after a cache miss on the back button) is not a fragment request.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, cast
from urllib.parse import urlsplit

from django.contrib import messages
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.cache import patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django_htmx.http import HttpResponseClientRedirect

from common.errors import DomainError, NotFound
from memories.models import Role
from ui.selectors import ROLE_RANK, Access, project_access

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

ProjectView = Callable[..., HttpResponse]


def signed_in(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """``login_required`` that htmx understands: a signed-out htmx request (a session that
    expired while the page was open) gets ``HX-Redirect`` to the sign-in page, which htmx
    follows as a full navigation, instead of a redirect it would swap into the page."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.user.is_authenticated:
            return view(request, *args, **kwargs)
        if is_htmx(request):
            page = urlsplit(request.headers.get("HX-Current-URL", ""))
            back = page.path + (f"?{page.query}" if page.query else "") if page.path else request.get_full_path()
            return HttpResponseClientRedirect(redirect_to_login(back).url)
        return redirect_to_login(request.get_full_path())

    return wrapper


def _rank(role: str) -> int:
    return ROLE_RANK[Role(role)]


def project_view(
    read: str = Role.VIEWER, write: str = Role.REVIEWER
) -> Callable[[ProjectView], Callable[..., HttpResponse]]:
    """Decorate ``view(request, access, ...)``; the URL passes the project's ``slug``.

    GET, HEAD and OPTIONS need ``read``; every other method needs the higher of ``read``
    and ``write``.
    """

    def decorator(view: ProjectView) -> Callable[..., HttpResponse]:
        @signed_in
        @wraps(view)
        def wrapper(request: HttpRequest, slug: str, *args: Any, **kwargs: Any) -> HttpResponse:
            # signed_in let only signed-in people through.
            access = project_access(user=cast(AbstractBaseUser, request.user), slug=slug)
            needed = read if request.method in SAFE_METHODS else max(read, write, key=_rank)
            if not access.can(needed):
                raise PermissionDenied(f"this needs the {needed} role")
            try:
                response = view(request, access, *args, **kwargs)
            except NotFound as error:  # what a selector did not find is the UI's 404 page
                raise Http404(error.message) from error
            patch_vary_headers(response, ("HX-Request",))
            return response

        return wrapper

    return decorator


def is_htmx(request: HttpRequest) -> bool:
    """True for an htmx request that wants a fragment; a history restore wants the whole page."""
    htmx = getattr(request, "htmx", None)  # None without HtmxMiddleware (e.g. RequestFactory)
    return htmx is not None and bool(htmx) and not htmx.history_restore_request


def next_url(request: HttpRequest, default: str) -> str:
    """Where to go after a form post: the ``next`` field if it is a local URL, else ``default``."""
    candidate = request.POST.get("next") or request.GET.get("next") or ""
    if candidate and url_has_allowed_host_and_scheme(candidate, allowed_hosts={request.get_host()}):
        return candidate
    return default


def query_of(url: str) -> str:
    return urlsplit(url).query


def refuse(request: HttpRequest, error: DomainError | str, *, back: str, status: int | None = None) -> HttpResponse:
    """Answer a refused action: plain text for htmx (app.js shows it), a message and redirect otherwise."""
    text = error.message if isinstance(error, DomainError) else error
    code = status or (error.status if isinstance(error, DomainError) else 400)
    if is_htmx(request):
        return HttpResponse(text, status=code, content_type="text/plain; charset=utf-8")
    messages.error(request, text)
    return HttpResponseRedirect(back)


def done(request: HttpRequest, text: str, *, back: str) -> HttpResponseRedirect:
    messages.success(request, text)
    return HttpResponseRedirect(back)


def page_context(access: Access, **extra: Any) -> dict[str, Any]:
    """What every project page's template gets: the project, the role and what it allows."""
    return {
        "access": access,
        "project": access.project,
        "can_review": access.can(Role.REVIEWER),
        "can_admin": access.can(Role.ADMIN),
        **extra,
    }


__all__ = ["Access", "done", "is_htmx", "next_url", "page_context", "project_view", "query_of", "refuse"]
