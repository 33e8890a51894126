"""Account pages outside any project: choosing a password from a one-time link."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.messages.views import SuccessMessageMixin
from django.urls import reverse_lazy


class SetPasswordView(SuccessMessageMixin, auth_views.PasswordResetConfirmView):  # type: ignore[type-arg]
    """A person created from Members chooses their password here, then signs in.

    Django's password-reset confirmation: the link's token is one-time (it depends on the
    password hash, which setting a password changes) and expires after PASSWORD_RESET_TIMEOUT.
    """

    template_name = "ui/set_password.html"
    success_url = reverse_lazy("ui:login")
    success_message = "Password set. Sign in with your username and the new password."
