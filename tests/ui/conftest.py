"""Fixtures for the curation UI: people with each role in the project's team, signed-in
clients, memories written through the services, and screenshots of failed browser tests."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from memories import services, tenancy
from memories.models import Membership, Memory, Project, Status

PASSWORD = "correct horse battery staple"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ROLES = ("viewer", "reviewer", "admin")


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    # The default hasher spends about a second per password on purpose; tests make many people.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def person(project: Project) -> Callable[[str], Any]:
    """A person with ``role`` in the project's team; ``"outsider"`` belongs to another team."""

    def make(role: str) -> Any:
        user = get_user_model().objects.create_user(username=f"{role}-person", password=PASSWORD)
        if role == "outsider":
            elsewhere = tenancy.project_get_or_create(slug="elsewhere", team_slug="elsewhere")
            Membership.objects.create(team=elsewhere.team, user=user, role="admin")
        else:
            Membership.objects.create(team=project.team, user=user, role=role)
        return user

    return make


@pytest.fixture
def client_as(person: Callable[[str], Any]) -> Callable[[str], Client]:
    def make(role: str) -> Client:
        client = Client()
        client.force_login(person(role))
        return client

    return make


@pytest.fixture
def memory_factory(project: Project) -> Callable[..., Memory]:
    """Write a memory through the services; embedding is left to the (absent) background worker."""

    def make(content: str = "Alice prefers tabs over spaces.", *, status: str = Status.ACTIVE, **fields: Any) -> Memory:
        draft = services.MemoryDraft(
            user_id=fields.pop("user_id", "alice"), content=content, category=fields.pop("category", ""), **fields
        )
        return services.memory_create(
            project=project, draft=draft, actor="system:test", status=status, embed_inline=False
        )

    return make


# --- Browser tests: screenshot on failure -------------------------------------------


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    setattr(item, f"rep_{report.when}", report)


CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


# Package scope: Playwright's sync API keeps an event loop running on the test thread while the
# browser lives, and tests outside tests/ui that start a loop of their own (asyncio.run, the MCP
# client, Django's async views) cannot run beside it.
@pytest.fixture(scope="package")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("Debian's chromium is not installed (make browser)")
    # Playwright's sync API keeps an event loop in this thread; Django then refuses ORM
    # calls from the test body unless told the loop is not serving async code here.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A fresh laptop-sized page; a failed test leaves its screenshot in test-artifacts/."""
    yield from open_page(browser, request, width=1280, height=800)


def open_page(browser: Any, request: pytest.FixtureRequest, *, width: int, height: int) -> Iterator[Any]:
    """A fresh page of that size, closed after its test; a failed test leaves its screenshot."""
    context = browser.new_context(viewport={"width": width, "height": height})
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()
