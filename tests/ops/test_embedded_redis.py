"""The embedded Redis is ready when start_redis returns, even while a long append-only file replays."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from serving import embedded


# Starts a Redis of its own over a large file (about 5 s on two cores): not for the quick lane.
@pytest.mark.slow
def test_redis_answers_as_soon_as_it_is_started_even_with_a_large_append_only_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    url = embedded.start_redis(home)
    try:
        client = redis.Redis.from_url(url)
        value = "x" * 1000
        for batch in range(40):  # about 40 MB of appended writes to replay at the next start
            with client.pipeline(transaction=False) as pipe:
                for index in range(1000):
                    pipe.set(f"key:{batch}:{index}", value)
                pipe.execute()
        client.close()
        embedded.stop_redis(home)
        url = embedded.start_redis(home)
        again = redis.Redis.from_url(url)
        # Without waiting for the replay, the first command answered LOADING.
        assert again.dbsize() == 40_000
        again.close()
    finally:
        embedded.stop_redis(home)
