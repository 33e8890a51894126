"""Sign-in throttling (common/login_throttle.py): the defect was 25 wrong passwords, then the right one, accepted."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from common import login_throttle
from common.redis import redis_client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def clean_counts():
    for key in redis_client().scan_iter("memoryhub:login-failures:*"):
        redis_client().delete(key)


@pytest.fixture
def people():
    User = get_user_model()
    User.objects.create_user("erin", password="right-horse-battery")
    User.objects.create_superuser("root", password="staple-correct-horse")


def sign_in(client, username, password, path="/accounts/login/"):
    return client.post(path, {"username": username, "password": password})


def test_after_ten_failures_even_the_right_password_is_refused(client, people):
    for _ in range(login_throttle.LIMIT):
        assert sign_in(client, "erin", "guess").status_code == 200  # the form again, with its error
    response = sign_in(client, "erin", "right-horse-battery")
    assert response.status_code == 200 and "_auth_user_id" not in client.session


def test_a_success_before_the_limit_clears_the_count(client, people):
    for _ in range(login_throttle.LIMIT - 1):
        sign_in(client, "erin", "guess")
    assert sign_in(client, "erin", "right-horse-battery").status_code == 302
    client.logout()
    for _ in range(login_throttle.LIMIT - 1):
        sign_in(client, "erin", "guess")
    assert sign_in(client, "erin", "right-horse-battery").status_code == 302


def test_another_persons_sign_in_is_not_throttled(client, people):
    for _ in range(login_throttle.LIMIT):
        sign_in(client, "erin", "guess")
    assert sign_in(client, "root", "staple-correct-horse").status_code == 302


def test_the_admin_login_is_throttled_too(client, people):
    for _ in range(login_throttle.LIMIT):
        sign_in(client, "root", "guess", path="/admin/login/")
    response = sign_in(client, "root", "staple-correct-horse", path="/admin/login/")
    assert response.status_code == 200 and "_auth_user_id" not in client.session
