"""A notice queued for the next page (Django's messages) shows in the banner on every page,
and nothing a page puts in its own context takes the banner's place."""

from __future__ import annotations

import pytest
from django.contrib import messages
from django.contrib.messages.storage.cookie import CookieStorage
from django.http import HttpRequest, HttpResponse
from django.test import Client

from capture.models import CaptureJob
from retrieval.models import RetrievalLog

pytestmark = pytest.mark.django_db

NOTICE = "Saved: a notice from the previous page."


def queue_notice(client: Client) -> None:
    """The cookie Django's message storage writes when a view adds a notice before redirecting."""
    storage, response = CookieStorage(HttpRequest()), HttpResponse()
    storage.add(messages.SUCCESS, NOTICE)
    storage.update(response)
    client.cookies[CookieStorage.cookie_name] = response.cookies[CookieStorage.cookie_name].value


def every_page(project, memory_factory) -> list[str]:
    memory = memory_factory("Alice drinks green tea.")
    job = CaptureJob.objects.create(
        project=project,
        user_id="alice",
        trigger="turn",
        created_by="t",
        window=[{"role": "user", "content": "Quick heads-up: I moved to Lisbon."}],
    )
    log = RetrievalLog.objects.create(
        project=project, user_id="alice", correlation_id="c", query_hash="h", result_count=0, latency_ms=5.0
    )
    p = f"/p/{project.slug}/"
    return [
        "/",
        p,
        f"{p}memories/",
        f"{p}memories/{memory.pk}/",
        f"{p}review/",
        f"{p}graph/",
        f"{p}captures/",
        f"{p}captures/{job.pk}/",
        f"{p}retrievals/",
        f"{p}retrievals/{log.pk}/",
        f"{p}playground/",
        f"{p}keys/",
        f"{p}members/",
        f"{p}settings/",
        f"{p}evaluation/",
        f"{p}transfer/",
    ]


def test_a_queued_notice_shows_in_the_banner_on_every_page(client_as, project, memory_factory):
    client = client_as("admin")
    for url in every_page(project, memory_factory):
        queue_notice(client)
        body = client.get(url).content.decode()
        banner = body.split('id="flash"', 1)[1].split("</div>", 1)[0]
        assert NOTICE in banner, url
        assert "{&#x27;role&#x27;" not in banner and "Lisbon" not in banner, url
