"""The published OpenAPI document is one Swagger UI can read: no key twice in any object
(a duplicate "200" made js-yaml refuse the whole document and the docs page stay blank)."""

from __future__ import annotations

import json


def test_openapi_json_has_no_duplicate_keys(client):
    duplicates: list[set[str]] = []

    def check(pairs):
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            duplicates.append({k for k in keys if keys.count(k) > 1})
        return dict(pairs)

    json.loads(client.get("/api/v1/openapi.json").content, object_pairs_hook=check)
    assert duplicates == []
