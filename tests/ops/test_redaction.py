from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.redaction import REDACTED, SecretMatch, find_secrets, is_mostly_secret, redact

OPENAI_KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5" * 4
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7x\nq9Zk=\n-----END RSA PRIVATE KEY-----"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"My key is {OPENAI_KEY}.", "My key is [REDACTED]."),
        ("use sk-ant-api03-Zx8yW7vU6tS5rQ4pO3nM2lK1 for Claude", "use [REDACTED] for Claude"),
        ("AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AWS_ACCESS_KEY_ID=[REDACTED]"),
        (f"token {GITHUB_TOKEN} works", "token [REDACTED] works"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv", "[REDACTED]"),
        ("slack: xoxb-123456789012-abcdefABCDEF", "slack: [REDACTED]"),
        ("maps key AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q", "maps key [REDACTED]"),
        (f"cookie={JWT}", "cookie=[REDACTED]"),
        ("Authorization: Bearer abc123DEF456ghi789JKL", "Authorization: Bearer [REDACTED]"),
        (f"key:\n{PEM}\nthanks", "key:\n[REDACTED]\nthanks"),
        ("password: hunter2", "password: [REDACTED]"),
        ("DB_PASSWORD=S3cr3t!pass", "DB_PASSWORD=[REDACTED]"),
        ("the pwd is Tr0ub4dor&3 for staging", "the pwd is [REDACTED] for staging"),
        ('password = "correct horse battery"', 'password = "[REDACTED]"'),
        ("postgres://app:s3cret@db.internal:5432/app", "postgres://app:[REDACTED]@db.internal:5432/app"),
        ("mysql://root:toor@localhost/shop", "mysql://root:[REDACTED]@localhost/shop"),
        ("mongodb+srv://svc:p4ss@cluster0.example.net/db", "mongodb+srv://svc:[REDACTED]@cluster0.example.net/db"),
        ("redis://:hunter2@cache:6379/0", "redis://:[REDACTED]@cache:6379/0"),
        ("api_key=9f8e7d6c5b4a39281706f5e4d3c2b1a0", "api_key=[REDACTED]"),
        ('"client_secret": "q8Zt3LmN0pW5xR7vB2cY9kJ4"', '"client_secret": "[REDACTED]"'),
        ("secret=Zx81kQm2Lp93Wn47Rt", "secret=[REDACTED]"),
    ],
)
def test_redact_replaces_each_kind_of_secret_with_a_marker(text: str, expected: str) -> None:
    assert redact(text) == (expected, 1)


@pytest.mark.parametrize(
    "text",
    [
        "The password policy requires 12 chars.",
        "The password is required on every login.",
        "The password is stored in Vault, not in the repo.",
        "Passwords are hashed with argon2.",
        "The password is 12 characters long.",
        "Use scikit-learn with sk-learn-compatible-estimator-api wrappers.",
        "Memory 550e8400-e29b-41d4-a716-446655440000 was superseded.",
        "Set max_tokens=4096 and token_count: 12.",
        "The token is short-lived.",
        "See https://example.com:8080/docs for the API key rotation policy.",
        "Bearer tokens expire after an hour.",
        "postgres://localhost:5432/app has no credentials.",
    ],
)
def test_ordinary_prose_about_secrets_is_not_redacted(text: str) -> None:
    assert redact(text) == (text, 0)


def test_find_secrets_reports_the_kind_and_the_span_of_each_secret() -> None:
    text = f"key {OPENAI_KEY} and password: hunter2"

    assert find_secrets(text) == [
        SecretMatch("openai_key", 4, 4 + len(OPENAI_KEY)),
        SecretMatch("password", len(text) - 7, len(text)),
    ]


def test_redact_counts_every_secret_it_replaces() -> None:
    text = f"{GITHUB_TOKEN} then AKIAIOSFODNN7EXAMPLE then password=hunter2"

    assert redact(text) == ("[REDACTED] then [REDACTED] then password=[REDACTED]", 3)


def test_redacting_twice_changes_nothing_more() -> None:
    once, _ = redact(f'password: "{OPENAI_KEY}" and postgres://u:p4ss@h/db')

    assert redact(once) == (once, 0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (OPENAI_KEY, True),
        ("The user's staging database password is hunter2.", True),
        (f"Use the key {OPENAI_KEY} for staging.", True),
        ("The team keeps the Stripe key in Vault; the test key is sk_test_4eC39HqLyjWDarjtT1zdp7dc.", False),
        ("The team uses PostgreSQL 16 for the event store.", False),
        ("The password policy requires 12 chars.", False),
    ],
)
def test_is_mostly_secret_is_true_only_when_the_secret_is_the_point(text: str, expected: bool) -> None:
    assert is_mostly_secret(text) is expected


_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_secrets = st.one_of(
    st.text(_ALNUM, min_size=20, max_size=40).map(lambda s: f"sk-{s}1"),
    st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", min_size=16, max_size=16).map(lambda s: f"AKIA{s}"),
    st.text(_ALNUM, min_size=36, max_size=40).map(lambda s: f"ghp_{s}"),
    st.text(_ALNUM, min_size=35, max_size=35).map(lambda s: f"AIza{s}"),
    st.text(_ALNUM + "!@#%^&*", min_size=4, max_size=20).map(lambda s: f"password: {s}9"),
    st.text(_ALNUM, min_size=4, max_size=20).map(lambda s: f"postgres://app:{s}@db.internal/app"),
)
_prose = st.lists(st.sampled_from(["The", "team", "uses", "the", "key", "for", "staging.", "Note:", "and"]), max_size=8)


@given(before=_prose, secret=_secrets, after=_prose)
def test_redact_never_leaves_a_secret_behind(before: list[str], secret: str, after: list[str]) -> None:
    text = " ".join([*before, secret, *after])

    redacted, count = redact(text)

    assert count >= 1
    assert REDACTED in redacted
    assert find_secrets(redacted) == []


@given(st.text(max_size=300))
def test_nothing_found_remains_findable_after_redaction(text: str) -> None:
    redacted, count = redact(text)

    assert count >= len(find_secrets(text))
    assert find_secrets(redacted) == []


_fragments = st.sampled_from(
    [
        "password",
        "pwd",
        " is ",
        ": ",
        "=",
        '"',
        "'",
        " ",
        "Bearer ",
        "api_key",
        "token",
        "sk-",
        "ghp_",
        "AKIA",
        "postgres://",
        "u",
        ":",
        "@",
        "host",
        "/",
        "[REDACTED]",
        "x9Zq81LmW2pR7tV4nB6c",
        "hunter2",
        ".",
        ",",
    ]
)


@given(st.lists(_fragments, max_size=25).map("".join))
def test_redaction_reaches_a_fixed_point_on_secret_shaped_noise(text: str) -> None:
    redacted, _ = redact(text)

    assert find_secrets(redacted) == []
