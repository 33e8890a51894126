"""Security headers on the UI and the API (common/security.py, docs/adr/0018-security-headers.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db

TEMPLATES = Path(settings.BASE_DIR) / "templates"


def test_pages_forbid_inline_script_and_framing(client):
    response = client.get("/accounts/login/")
    csp = response.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    assert "frame-ancestors 'none'" in csp
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "same-origin"
    assert "camera=()" in response.headers["Permissions-Policy"]


def test_api_answers_carry_the_policy_too(api):
    response = api.get("/memories", user_id="alice")
    assert "default-src 'self'" in response.headers["Content-Security-Policy"]


@pytest.mark.parametrize("template", sorted(TEMPLATES.rglob("*.html")), ids=lambda p: p.name)
def test_no_template_holds_inline_script(template: Path):
    html = template.read_text()
    inline = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html)
    handlers = re.findall(r"\son[a-z]+\s*=", html)
    assert (inline, handlers) == ([], [])


def test_session_cookie_is_http_only_and_secure_in_production():
    assert settings.SESSION_COOKIE_HTTPONLY is True
    assert settings.SESSION_COOKIE_SECURE == settings.CSRF_COOKIE_SECURE == settings.MEMORYHUB_PRODUCTION
