"""What a team admin manages: API keys, project settings and members."""

from __future__ import annotations

import contextlib
from typing import Any

from django.conf import settings
from django.contrib.auth.tokens import default_token_generator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.views.decorators.http import require_POST

from common.errors import DomainError
from memories import demo, tenancy
from memories.models import ApiKey, Project, Role
from retrieval.embedding.reembed import get_progress
from retrieval.llm import llm_configured
from retrieval.vectors.memory_vectors import active_model
from ui import selectors as ui_selectors
from ui.forms import ApiKeyForm, MemberAddForm, MemberRoleForm, PersonCreateForm, ProjectSettingsForm
from ui.views.access import Access, done, is_htmx, page_context, project_view, refuse


def _keys_context(access: Access, **extra: Any) -> dict[str, Any]:
    keys = ui_selectors.api_keys(project=access.project)
    # ``extra`` may carry the form that failed validation: it replaces the empty one.
    return page_context(access, **{"keys": keys, "form": ApiKeyForm(), "nav": "keys", **extra})


@project_view(Role.ADMIN)
def api_keys(request: HttpRequest, access: Access) -> HttpResponse:
    """List keys; POST creates one and shows its plain value once, on this answer only."""
    if request.method != "POST":
        return render(request, "ui/keys.html", _keys_context(access))
    form = ApiKeyForm(request.POST)
    if not form.is_valid():
        return render(request, "ui/keys.html", _keys_context(access, form=form), status=422)
    key, plain = tenancy.api_key_create(project=access.project, name=form.cleaned_data["name"], created_by=request.user)
    context = _keys_context(access, new_key=key, plain_key=plain)
    # The plain key must never be cached or replayed from history.
    response = render(request, "ui/keys.html#keys" if is_htmx(request) else "ui/keys.html", context)
    response["Cache-Control"] = "no-store"
    return response


@project_view(Role.ADMIN)
@require_POST
def api_key_revoke(request: HttpRequest, access: Access, key_id: int) -> HttpResponse:
    """Revoke a key: requests with it answer 401 from now on."""
    key = ApiKey.objects.filter(project=access.project, pk=key_id).first()
    back = reverse("ui:keys", args=[access.project.slug])
    if key is None:
        return refuse(request, "No such key.", back=back, status=404)
    tenancy.api_key_revoke(key=key)
    if not is_htmx(request):
        return done(request, f"Key {key.prefix}… revoked.", back=back)
    return render(request, "ui/keys.html#keys", _keys_context(access, notice=f"Key {key.prefix}… revoked."))


def _reembed_progress(project_id: int) -> dict[str, Any] | None:
    # Progress lives in Redis; the page still works when Redis does not answer.
    with contextlib.suppress(Exception):
        return get_progress(project_id)
    return None


def llm_status() -> dict[str, Any]:
    """What the server's LLM set-up does for this project: capture classifier and HyDE, or neither."""
    if not llm_configured():
        return {"configured": False}
    return {
        "configured": True,
        "endpoint": settings.MEMORYHUB_LLM_BASE_URL or "OpenAI",
        "model": settings.MEMORYHUB_LLM_MODEL,
        "hyde_model": settings.MEMORYHUB_HYDE_MODEL,
    }


def _settings_context(access: Access, form: ProjectSettingsForm, **extra: Any) -> dict[str, Any]:
    limit = form.fields["retrieval_rate_limit"]
    default = Project._meta.get_field("retrieval_rate_limit").get_default()
    limit.help_text = f"{limit.help_text} New projects get the production default of {default}."
    if access.project.slug == "demo" and access.project.retrieval_rate_limit == demo.DEMO_RATE_LIMIT:
        limit.help_text += (
            f" The demo workspace starts at {demo.DEMO_RATE_LIMIT} so exploring by hand never hits it; "
            "over the limit a retrieve answers no memories and names rate_limited."
        )
    return page_context(
        access,
        form=form,
        embedding_model=active_model(access.project),
        llm=llm_status(),
        reembed=_reembed_progress(access.project.pk),
        nav="settings",
        **extra,
    )


@project_view(Role.VIEWER, write=Role.ADMIN)
def project_settings(request: HttpRequest, access: Access) -> HttpResponse:
    """Every member sees the settings; admins change them."""
    initial = ProjectSettingsForm.initial_for(access.project)
    if request.method != "POST":
        return render(request, "ui/settings.html", _settings_context(access, ProjectSettingsForm(initial=initial)))
    form = ProjectSettingsForm(request.POST, initial=initial)
    if form.is_valid():
        try:
            tenancy.project_settings_update(project=access.project, changes=form.changes())
            return done(request, "Settings saved.", back=reverse("ui:settings", args=[access.project.slug]))
        except DomainError as error:
            form.add_error(None, error.message)
    return render(request, "ui/settings.html", _settings_context(access, form), status=422)


def _members_context(access: Access, **extra: Any) -> dict[str, Any]:
    members = ui_selectors.team_members(project=access.project)
    defaults = {
        "members": members,
        "add_form": MemberAddForm(),
        "person_form": PersonCreateForm(),
        "roles": Role.choices,
        "nav": "members",
    }
    return page_context(access, **{**defaults, **extra})


@project_view(Role.VIEWER, write=Role.ADMIN)
def members(request: HttpRequest, access: Access) -> HttpResponse:
    """The team's members; admins add people by username with a role."""
    if request.method != "POST":
        return render(request, "ui/members.html", _members_context(access))
    form = MemberAddForm(request.POST)
    if form.is_valid():
        try:
            tenancy.membership_add(team=access.project.team, **form.cleaned_data)
            back = reverse("ui:members", args=[access.project.slug])
            return done(request, f"{form.cleaned_data['username']} added.", back=back)
        except DomainError as error:
            form.add_error("username" if error.code == "unknown_user" else None, error.message)
    return render(request, "ui/members.html", _members_context(access, add_form=form), status=422)


def set_password_url(request: HttpRequest, user: Any) -> str:
    """The one-time link where ``user`` chooses a password (Django's password-reset token:
    it expires after PASSWORD_RESET_TIMEOUT and stops working once a password is set)."""
    uidb64 = urlsafe_base64_encode(force_bytes(user.pk))
    token = default_token_generator.make_token(user)
    return request.build_absolute_uri(reverse("ui:set_password", args=[uidb64, token]))


@project_view(Role.ADMIN)
@require_POST
def person_create(request: HttpRequest, access: Access) -> HttpResponse:
    """Create a person in the team and show, once, the link where they set their password."""
    form = PersonCreateForm(request.POST)
    if form.is_valid():
        try:
            membership = tenancy.person_create(
                team=access.project.team, username=form.cleaned_data["new_username"], role=form.cleaned_data["new_role"]
            )
        except DomainError as error:
            form.add_error("new_username", error.message)
        else:
            return _invite_response(request, access, membership.user, status=201)
    return render(request, "ui/members.html", _members_context(access, person_form=form), status=422)


def _invite_response(request: HttpRequest, access: Access, user: Any, *, status: int) -> HttpResponse:
    """The members page with ``user``'s set-password link, shown on this answer only."""
    days = settings.PASSWORD_RESET_TIMEOUT // 86400
    invite = set_password_url(request, user)
    context = _members_context(access, invited=user.get_username(), invite_url=invite, invite_days=days)
    response = render(request, "ui/members.html", context, status=status)
    response["Cache-Control"] = "no-store"  # the link sets a password: never cached
    return response


@project_view(Role.ADMIN)
@require_POST
def member_invite_again(request: HttpRequest, access: Access, membership_id: int) -> HttpResponse:
    """A new set-password link for a member who has not chosen a password yet (a lost link)."""
    membership = ui_selectors.membership_in_team(project=access.project, membership_id=membership_id)
    if membership.user.has_usable_password():
        back = reverse("ui:members", args=[access.project.slug])
        return refuse(request, f"{membership.user.get_username()} has set a password already.", back=back, status=409)
    return _invite_response(request, access, membership.user, status=200)


@project_view(Role.ADMIN)
@require_POST
def member_change(request: HttpRequest, access: Access, membership_id: int, action: str) -> HttpResponse:
    """Set a member's role, or remove them from the team."""
    if action not in ("role", "remove"):
        raise Http404("no such action")
    membership = ui_selectors.membership_in_team(project=access.project, membership_id=membership_id)
    back = reverse("ui:members", args=[access.project.slug])
    name = membership.user.get_username()
    try:
        if action == "remove":
            tenancy.membership_remove(membership=membership)
            return done(request, f"{name} removed.", back=back)
        form = MemberRoleForm(request.POST)
        if not form.is_valid():
            return refuse(request, "Choose a role.", back=back, status=422)
        tenancy.membership_set_role(membership=membership, role=form.cleaned_data["role"])
    except DomainError as error:
        return refuse(request, error, back=back)
    return done(request, f"{name} is now {form.cleaned_data['role']}.", back=back)
