"""Every page names an icon and /favicon.ico answers it: no 404 in the log on each page view."""

from __future__ import annotations

import re
import urllib.request

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_pages_name_an_icon_and_favicon_ico_leads_to_it(client_as, project, live_server):
    page = client_as("viewer").get(f"/p/{project.slug}/").content.decode()
    icon = re.search(r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', page)
    assert icon is not None
    with urllib.request.urlopen(live_server.url + icon[1], timeout=10) as named:
        assert named.status == 200 and named.read().startswith(b"<svg")
    # Asked for by name (the API docs, the admin): redirected to the same icon.
    with urllib.request.urlopen(live_server.url + "/favicon.ico", timeout=10) as asked:
        assert asked.url == live_server.url + icon[1] and asked.status == 200
