"""Django settings. Everything comes from the environment; see docs/configuration.md.

Every environment variable is read here, once, through ``common.config.Environment``:
one line per variable gives its name, type, default and meaning, and the value becomes the
Django setting of the same name (code reads ``settings.MEMORYHUB_…``, never the environment
and never a default of its own). To add a variable, add its line in the right section below
and a row to the table in docs/configuration.md (tests/ops checks both). The last line checks the
whole configuration: a bad value or a ``MEMORYHUB_*`` variable nobody reads (a typo) stops
every process at start with one error naming each variable.

Importing this module has no side effects: it starts no server and writes no file
(``serving.embedded.start_servers`` does that, called by the entry points).
"""

from __future__ import annotations

import os
from pathlib import Path

from common.config import Environment, database_settings
from serving import embedded

BASE_DIR = Path(__file__).resolve().parent.parent
env = Environment(base_dir=BASE_DIR)

# --- Where things run -------------------------------------------------------------------
MEMORYHUB_HOME = env.path(
    "MEMORYHUB_HOME",
    ".memoryhub",
    "data, sockets and logs of the embedded Postgres and Redis; demo credentials; the development secret key. "
    "A relative path is relative to the project folder",
)
MEMORYHUB_REPORTS_DIR = env.path(
    "MEMORYHUB_REPORTS_DIR",
    "reports",
    "where the web UI's Evaluation page reads the `eval_retrieval` / `eval_capture` reports",
)
DATABASE_URL = env.text(
    "DATABASE_URL",
    "",
    "e.g. `postgresql://user:pass@host:5432/memoryhub?sslmode=verify-full` (needs the `vector` extension); "
    "libpq options in the query string are kept",
    shown="embedded Postgres",
)
REDIS_URL = env.text(
    "REDIS_URL",
    "",
    "e.g. `rediss://:pass@host:6380/0`: Celery broker, per-turn cache, session state",
    shown="embedded Redis",
)
# The embedded servers stand in for the URLs that are not given (serving/embedded.py).
EMBEDDED_POSTGRES = not DATABASE_URL
EMBEDDED_REDIS = not REDIS_URL
DATABASE_URL = DATABASE_URL or embedded.database_url(MEMORYHUB_HOME)
REDIS_URL = REDIS_URL or embedded.redis_url(MEMORYHUB_HOME)
PORT = env.integer("PORT", 8000, "HTTP port of `make run`", minimum=1)
MEMORYHUB_BIND = env.text("MEMORYHUB_BIND", "127.0.0.1", "address `make run` listens on (`0.0.0.0`: every interface)")
# One worker process per core (at least two, so a slow request never blocks the service):
# measured on 2 cores, 2 workers answered 4 clients faster than 3 (docs/adr/0043).
WEB_CONCURRENCY = env.integer(
    "WEB_CONCURRENCY",
    max(2, os.cpu_count() or 2),
    "gunicorn worker processes (`make run`, the Docker image)",
    minimum=1,
)
MEMORYHUB_NO_SERVERS = env.switch(
    "MEMORYHUB_NO_SERVERS", False, "never start embedded servers (tools that only import settings, like mypy)"
)
MEMORYHUB_STOP_SERVERS = env.switch(
    "MEMORYHUB_STOP_SERVERS",
    False,
    "set by `make test` and the one-shot targets (bench, drills, load, fuzz): stop the embedded servers the "
    "test suite or the manage.py command started when it ends (a plain `pytest` run leaves them up)",
)

# --- Security ---------------------------------------------------------------------------
MEMORYHUB_PRODUCTION = env.switch(
    "MEMORYHUB_PRODUCTION",
    False,
    "production mode: refuses to start without a strong `SECRET_KEY`, explicit hosts and external servers; "
    "secure cookies, HTTPS redirect, HSTS, trusts `X-Forwarded-Proto` from the proxy",
)
MEMORYHUB_ROW_SECURITY = env.switch(
    "MEMORYHUB_ROW_SECURITY",
    True,
    "confine each API request's database connection to its project with Postgres row-level security "
    "(docs/adr/0014-row-level-security.md); off only to measure its cost",
)
DEBUG = env.switch("MEMORYHUB_DEBUG", False, "Django debug mode (never in production)")
SECRET_KEY = env.secret(
    "SECRET_KEY",
    "Django's signing key; required in production (50+ random characters). "
    "Unset in development: a random key kept in `$MEMORYHUB_HOME/secret-key`",
    shown="generated",
)
ALLOWED_HOSTS = env.csv("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"], "host names served, comma-separated")
CSRF_TRUSTED_ORIGINS = env.csv(
    "CSRF_TRUSTED_ORIGINS", [], "origins allowed to POST forms, e.g. `https://memory.example.com`"
)
MEMORYHUB_SSL_REDIRECT = env.switch(
    "MEMORYHUB_SSL_REDIRECT", True, "production: redirect plain HTTP to HTTPS (off when the proxy does it)"
)
MEMORYHUB_HSTS_SECONDS = env.integer(
    "MEMORYHUB_HSTS_SECONDS", 31536000, "production: `Strict-Transport-Security` max-age (must be > 0)", minimum=0
)
LOG_LEVEL = env.choice("LOG_LEVEL", "INFO", ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"), "root log level")

if MEMORYHUB_PRODUCTION:
    if len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5:
        env.fail(
            "SECRET_KEY: production needs a random key of at least 50 characters "
            "(python -c 'import secrets; print(secrets.token_urlsafe(50))')"
        )
    if not ALLOWED_HOSTS or "*" in ALLOWED_HOSTS:
        env.fail("ALLOWED_HOSTS: production needs the host names it serves, not '*'")
    if EMBEDDED_POSTGRES or EMBEDDED_REDIS:
        env.fail("DATABASE_URL and REDIS_URL: production runs against external servers, not the embedded ones")
    if DEBUG:
        env.fail("MEMORYHUB_DEBUG: must be off in production")
    if MEMORYHUB_HSTS_SECONDS <= 0:
        env.fail("MEMORYHUB_HSTS_SECONDS: production sends HSTS; give a max-age above 0")
elif not SECRET_KEY:
    SECRET_KEY = embedded.development_secret_key(MEMORYHUB_HOME)

# Production sits behind a TLS-terminating proxy that sets X-Forwarded-Proto (docs/configuration.md "Deploying").
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = MEMORYHUB_PRODUCTION
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if MEMORYHUB_PRODUCTION else None
SECURE_SSL_REDIRECT = MEMORYHUB_PRODUCTION and MEMORYHUB_SSL_REDIRECT
SECURE_REDIRECT_EXEMPT = [r"^api/v1/health$"]  # load balancers probe over plain HTTP
SECURE_HSTS_SECONDS = MEMORYHUB_HSTS_SECONDS if MEMORYHUB_PRODUCTION else 0

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_htmx",
    "template_partials",
    # django-ninja as an app: its API docs page uses the Swagger UI files it ships, not a CDN.
    "ninja",
    "memoryhub",
    "memories",
    "conversations",
    "retrieval",
    "capture",
    "consolidation",
    "evaluation",
    "integrations",
    "profiles",
    "ui",
]

MIDDLEWARE = [
    "common.row_security.RowSecurityMiddleware",
    "common.security.SecurityHeadersMiddleware",
    "common.errors.ApiErrorEnvelopeMiddleware",
    "common.idempotency.IdempotencyMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "memoryhub.urls"
WSGI_APPLICATION = "memoryhub.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

# --- Databases and broker -----------------------------------------------------------------
DATABASES = {"default": database_settings(DATABASE_URL)}
# The retrieve path's statements go as named prepared statements, planned once per connection
# (common/prepared.py); off for a pooler in transaction mode that does not keep them per client.
MEMORYHUB_PREPARED_STATEMENTS = env.switch(
    "MEMORYHUB_PREPARED_STATEMENTS", True, "the retrieve path's statements are prepared once per connection"
)

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "memoryhub",
        "OPTIONS": {"socket_timeout": 2, "socket_connect_timeout": 2},
    }
}

# Celery: redis over a unix socket is spelled redis+socket:// for kombu.
CELERY_BROKER_URL = REDIS_URL.replace("unix://", "redis+socket://", 1)
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A message not acknowledged within this time is delivered again (acks_late): every task's
# hard time limit stays below it (tests/ops checks), so a running task is never run twice.
BROKER_VISIBILITY_TIMEOUT_S = 3600
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": BROKER_VISIBILITY_TIMEOUT_S,
    "socket_timeout": 2,
    "socket_connect_timeout": 2,
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_TIME_LIMIT = 600
CELERY_TASK_SOFT_TIME_LIMIT = 540
CELERY_TASK_ALWAYS_EAGER = False
CELERY_BEAT_SCHEDULE_FILENAME = str(MEMORYHUB_HOME / "celerybeat-schedule")

# --- Models: embedder and LLM -----------------------------------------------------------
MEMORYHUB_EMBEDDER = env.choice(
    "MEMORYHUB_EMBEDDER",
    "local",
    ("local", "local-mpnet", "openai"),
    "`local` (all-MiniLM-L6-v2 int8 ONNX, offline), `local-mpnet` (all-mpnet-base-v2, after `make mpnet`) or `openai`",
)
MEMORYHUB_EMBEDDING_MODEL = env.text(
    "MEMORYHUB_EMBEDDING_MODEL", "", "the model name for `MEMORYHUB_EMBEDDER=openai`", shown="text-embedding-3-small"
)
MEMORYHUB_EMBEDDING_DIMENSION = (
    env.integer(
        "MEMORYHUB_EMBEDDING_DIMENSION", 0, "expected vector size of `openai` embeddings (0: learnt)", minimum=0
    )
    or None
)
MEMORYHUB_EMBEDDING_BASE_URL = env.text(
    "MEMORYHUB_EMBEDDING_BASE_URL",
    "",
    "OpenAI-compatible server for embeddings when it is not the chat one",
    shown="`MEMORYHUB_LLM_BASE_URL`",
)
MEMORYHUB_EMBEDDING_API_KEY = env.secret(
    "MEMORYHUB_EMBEDDING_API_KEY", "key for `MEMORYHUB_EMBEDDING_BASE_URL`", shown="`OPENAI_API_KEY`"
)
MEMORYHUB_EMBED_TIMEOUT = env.number("MEMORYHUB_EMBED_TIMEOUT", 10.0, "seconds for one embeddings request", minimum=0)
MEMORYHUB_EMBED_THREADS = env.integer(
    "MEMORYHUB_EMBED_THREADS", 0, "threads of the local embedder (0: the CPUs this process may use)", minimum=0
)
MEMORYHUB_QUERY_THREADS = env.integer(
    "MEMORYHUB_QUERY_THREADS", 1, "threads of the local embedder for a question (up to the usable CPUs)", minimum=1
)
OPENAI_API_KEY = env.secret(
    "OPENAI_API_KEY", "key for the OpenAI-compatible endpoint (chat, and embeddings by default)"
)
MEMORYHUB_LLM_BASE_URL = env.text(
    "MEMORYHUB_LLM_BASE_URL",
    "",
    "any OpenAI-compatible server, e.g. `http://localhost:11434/v1`. With neither this nor `OPENAI_API_KEY`, "
    "capture uses the rule-based extractor and HyDE is off",
    shown="—",
)
MEMORYHUB_LLM_MODEL = env.text("MEMORYHUB_LLM_MODEL", "gpt-4o-mini", "the capture classifier's model")
MEMORYHUB_HYDE_MODEL = (
    env.text("MEMORYHUB_HYDE_MODEL", "", "the model that writes HyDE hypotheses", shown="the LLM model")
    or MEMORYHUB_LLM_MODEL
)

# --- Retrieval ------------------------------------------------------------------------
# Relevance cut (retrieval/ranking/relevance.py): unset means the fitted model's own min_score and margin.
MEMORYHUB_MIN_SCORE = env.optional_number(
    "MEMORYHUB_MIN_SCORE", "relevance cut of `POST /retrieve` (a request's `min_score` replaces it)", shown="fitted"
)
MEMORYHUB_RELEVANCE_MARGIN = env.optional_number(
    "MEMORYHUB_RELEVANCE_MARGIN", "keep answers within this much of the best one's relevance", shown="fitted"
)
# Episodes (retrieval/ranking/episodes.py) have their own absolute cut: a message is noisier than a
# memory, and its scores run lower (chosen on the natural set's dev people; docs/adr/0080).
MEMORYHUB_EPISODE_MIN_SCORE = env.number(
    "MEMORYHUB_EPISODE_MIN_SCORE", 0.06, "relevance cut of episodes (captured messages) in `POST /retrieve`", minimum=0
)
# Profiles (profiles/): the standing facts of each end user, injected first by `POST /retrieve`
# (docs/adr/0096-profiles.md).
MEMORYHUB_PROFILE_TOKENS = env.integer(
    "MEMORYHUB_PROFILE_TOKENS", 200, "most tokens of a user's profile text (cl100k_base)", minimum=1
)
MEMORYHUB_PROFILE_BUDGET_SHARE = env.number(
    "MEMORYHUB_PROFILE_BUDGET_SHARE", 0.25, "share of a retrieve's token budget the profile may take", minimum=0
)
MEMORYHUB_PROFILE_DEBOUNCE_S = env.number(
    "MEMORYHUB_PROFILE_DEBOUNCE_S", 5.0, "seconds a profile rebuild waits after a memory change", minimum=0
)
# The optional LLM judge stage (retrieval/ranking/judge.py): off unless asked for, and only with an LLM.
MEMORYHUB_JUDGE = env.switch("MEMORYHUB_JUDGE", False, "LLM judge over the best few candidates (needs an LLM)")
MEMORYHUB_JUDGE_TIMEOUT_S = env.number("MEMORYHUB_JUDGE_TIMEOUT_S", 1.5, "seconds the judge may take", minimum=0)
MEMORYHUB_JUDGE_MODEL = env.text("MEMORYHUB_JUDGE_MODEL", "", "the judge's model", shown="the LLM model")
MEMORYHUB_RETRIEVE_BUDGET_S = env.number(
    "MEMORYHUB_RETRIEVE_BUDGET_S", 2.0, "time budget of one retrieve, in seconds", minimum=0
)
MEMORYHUB_HYDE_TIMEOUT_S = env.number("MEMORYHUB_HYDE_TIMEOUT_S", 1.2, "seconds HyDE may take", minimum=0)
MEMORYHUB_HYDE_N = env.integer("MEMORYHUB_HYDE_N", 3, "HyDE hypotheses per query", minimum=1)
# Full text skips query words found in more than this share of the memories a user can see
# (an IDF-style cut: such words rank nothing and cost a row check each), for groups of at
# least MIN_ROWS memories; beat refreshes the counts (retrieval/ranking/keyword_stats.py).
MEMORYHUB_KEYWORD_MAX_SHARE = env.number(
    "MEMORYHUB_KEYWORD_MAX_SHARE", 0.1, "full text skips words in more than this share of a user's memories", minimum=0
)
MEMORYHUB_KEYWORD_STATS_MIN_ROWS = env.integer(
    "MEMORYHUB_KEYWORD_STATS_MIN_ROWS",
    100,
    "word counts are kept for users with at least this many memories",
    minimum=0,
)
# Of the remaining words, rarest first, only as many as match about this many memories in all
# (the rarest always; 0: no limit): bounds the keyword stage's cost on large corpora.

MEMORYHUB_KEYWORD_ROW_BUDGET = env.integer(
    "MEMORYHUB_KEYWORD_ROW_BUDGET", 1000, "rarest words first, up to about this many matches (0: no limit)", minimum=0
)
# Each web process keeps the vector groups its searches read (a user's own vectors, a project's
# shared ones) in memory, up to this many MB, and picks the nearest there (retrieval/vectors/resident_vectors.py;
# 0: Postgres reads them on every search). 10,000 vectors of 384 dimensions take 15 MB.
MEMORYHUB_RESIDENT_VECTORS_MB = env.integer(
    "MEMORYHUB_RESIDENT_VECTORS_MB", 512, "MB of vectors each web process keeps for search (0: none)", minimum=0
)

# --- API limits ----------------------------------------------------------------------
MEMORYHUB_MAX_CONTENT_CHARS = env.integer(
    "MEMORYHUB_MAX_CONTENT_CHARS", 8000, "longest memory content accepted (413 above)", minimum=1
)
MEMORYHUB_MAX_BULK = env.integer("MEMORYHUB_MAX_BULK", 1000, "most memories in one bulk request (413 above)", minimum=1)
MEMORYHUB_MAX_BODY_BYTES = env.integer(
    "MEMORYHUB_MAX_BODY_BYTES", 10 * 1024 * 1024, "largest request body (413 above)", minimum=1
)
DATA_UPLOAD_MAX_MEMORY_SIZE = MEMORYHUB_MAX_BODY_BYTES

# --- Capture limits and timings (see docs/guide.md "Capture") ----------------------------
MEMORYHUB_MAX_CAPTURE_MESSAGES = env.integer(
    "MEMORYHUB_MAX_CAPTURE_MESSAGES", 200, "most messages in one capture (413 above)", minimum=1
)
MEMORYHUB_MAX_MESSAGE_CHARS = env.integer(
    "MEMORYHUB_MAX_MESSAGE_CHARS", 32000, "longest message or observation output (413 above)", minimum=1
)
MEMORYHUB_CAPTURE_WINDOW_CHARS = env.integer(
    "MEMORYHUB_CAPTURE_WINDOW_CHARS", 24000, "characters of the newest messages the classifier sees", minimum=1
)
MEMORYHUB_CAPTURE_EXISTING_LIMIT = env.integer(
    "MEMORYHUB_CAPTURE_EXISTING_LIMIT", 100, "existing memories the classifier sees", minimum=0
)
MEMORYHUB_CAPTURE_MAX_ATTEMPTS = env.integer(
    "MEMORYHUB_CAPTURE_MAX_ATTEMPTS", 3, "LLM attempts per capture job before `failed`", minimum=1
)
MEMORYHUB_CAPTURE_LLM_TIMEOUT = env.number(
    "MEMORYHUB_CAPTURE_LLM_TIMEOUT",
    60.0,
    "seconds for one LLM call of the worker (capture's classifier, consolidation's judge and observer)",
    minimum=0,
)
MEMORYHUB_CAPTURE_RETRY_SECONDS = env.number(
    "MEMORYHUB_CAPTURE_RETRY_SECONDS", 10.0, "first back-off of a failed capture job (doubles per attempt)", minimum=0
)
MEMORYHUB_CAPTURE_REQUEUE_QUEUED_AFTER = env.integer(
    "MEMORYHUB_CAPTURE_REQUEUE_QUEUED_AFTER", 60, "seconds before the sweeper re-queues a `queued` job", minimum=1
)
# Above the capture task's hard time limit (300 s), so a live job is never re-queued.
MEMORYHUB_CAPTURE_REQUEUE_RUNNING_AFTER = env.integer(
    "MEMORYHUB_CAPTURE_REQUEUE_RUNNING_AFTER", 360, "seconds before the sweeper re-queues a `running` job", minimum=1
)
MEMORYHUB_SESSION_MESSAGES = env.integer(
    "MEMORYHUB_SESSION_MESSAGES", 50, "newest messages kept per conversation in Redis", minimum=1
)
MEMORYHUB_SESSION_TTL_SECONDS = env.integer(
    "MEMORYHUB_SESSION_TTL_SECONDS", 24 * 3600, "expiry of a conversation's Redis tail", minimum=1
)

# --- Consolidation (docs/adr/0093-consolidation.md) ----------------------------------------
MEMORYHUB_CONSOLIDATION_INTERVAL_S = env.integer(
    "MEMORYHUB_CONSOLIDATION_INTERVAL_S",
    3600,
    "seconds between beat's rounds of consolidation (each end user whose memories changed since their last run)",
    minimum=60,
)

# Names that work in progress will read; each becomes a typed line above when it does.
env.reserve("MEMORYHUB_LOCAL_LLM", "MEMORYHUB_LOCAL_LLM_PORT", "MEMORYHUB_RELEVANCE_MODEL")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# The users in the database, behind sign-in throttling (common/login_throttle.py); the plain
# model backend stays listed so sessions signed in before it keep working.
AUTHENTICATION_BACKENDS = [
    "common.login_throttle.ThrottledModelBackend",
    "django.contrib.auth.backends.ModelBackend",
]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # The MCP view starts the SDK's session manager for every request (integrations/mcp/http.py):
    # its start/stop lines at INFO would be two log lines per MCP call.
    "loggers": {"mcp.server.streamable_http_manager": {"level": "WARNING"}},
}

# --- Periodic work (Celery beat) -----------------------------------------------------
CELERY_BEAT_SCHEDULE = {
    "sweep-embeddings": {"task": "capture.tasks.sweep_embeddings", "schedule": 60.0},
    "sweep-capture-jobs": {"task": "capture.tasks.sweep_capture_jobs", "schedule": 30.0},
    "sweep-message-embeddings": {"task": "capture.tasks.sweep_message_embeddings", "schedule": 120.0},
    "refresh-keyword-stats": {"task": "retrieval.tasks.refresh_keyword_stats_task", "schedule": 600.0},
    # Queues a consolidation for every end user whose memories changed since their last one, and
    # re-queues runs a lost message or a dead worker left behind (consolidation/tasks.py).
    "schedule-consolidations": {
        "task": "consolidation.tasks.schedule_consolidations",
        "schedule": float(MEMORYHUB_CONSOLIDATION_INTERVAL_S),
    },
}

# Last: one error naming every bad or unknown variable (see common/config.py).
env.check()
