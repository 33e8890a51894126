"""Django settings. Everything comes from the environment; see README "Configuration"."""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url

from memoryhub import embedded

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    return os.environ.get(name, str(default)).strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


DEBUG = env_bool("MEMORYHUB_DEBUG")
# A fixed development key would be a known secret in production; demand one there.
SECRET_KEY = os.environ.get("SECRET_KEY") or ("insecure-dev-key" if not env_bool("MEMORYHUB_PRODUCTION") else "")
if not SECRET_KEY:
    raise RuntimeError("SECRET_KEY must be set when MEMORYHUB_PRODUCTION is on")
ALLOWED_HOSTS = os.environ.get("ALLOWED_HOSTS", "*").split(",")
CSRF_TRUSTED_ORIGINS = [o for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o]

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
    "memories",
    "retrieval",
    "capture",
]

MIDDLEWARE = [
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

# --- Databases and broker: embedded servers unless URLs are given ------------------
DATABASES = {"default": dj_database_url.parse(embedded.database_url(), conn_max_age=600, conn_health_checks=True)}
DATABASES["default"]["OPTIONS"] = {"connect_timeout": 5}
REDIS_URL = embedded.redis_url()

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
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600, "socket_timeout": 2, "socket_connect_timeout": 2}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_TIME_LIMIT = 600
CELERY_TASK_SOFT_TIME_LIMIT = 540
CELERY_TASK_ALWAYS_EAGER = False
CELERY_BEAT_SCHEDULE_FILENAME = str(embedded.home() / "celerybeat-schedule")

# --- Models: embedder and LLM -----------------------------------------------------
MEMORYHUB_EMBEDDER = os.environ.get("MEMORYHUB_EMBEDDER", "local")
MEMORYHUB_EMBEDDING_MODEL = os.environ.get("MEMORYHUB_EMBEDDING_MODEL", "")
MEMORYHUB_EMBEDDING_DIMENSION = env_int("MEMORYHUB_EMBEDDING_DIMENSION", 0) or None
MEMORYHUB_EMBED_TIMEOUT = float(os.environ.get("MEMORYHUB_EMBED_TIMEOUT", "10"))
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
MEMORYHUB_LLM_BASE_URL = os.environ.get("MEMORYHUB_LLM_BASE_URL", "")
MEMORYHUB_LLM_MODEL = os.environ.get("MEMORYHUB_LLM_MODEL", "gpt-4o-mini")
MEMORYHUB_HYDE_MODEL = os.environ.get("MEMORYHUB_HYDE_MODEL", "") or MEMORYHUB_LLM_MODEL

# --- Retrieval ------------------------------------------------------------------------
# Relevance cut (retrieval/relevance.py): unset means the fitted model's own min_score and margin.
MEMORYHUB_MIN_SCORE = float(os.environ["MEMORYHUB_MIN_SCORE"]) if os.environ.get("MEMORYHUB_MIN_SCORE") else None
MEMORYHUB_RELEVANCE_MARGIN = (
    float(os.environ["MEMORYHUB_RELEVANCE_MARGIN"]) if os.environ.get("MEMORYHUB_RELEVANCE_MARGIN") else None
)
# The optional LLM judge stage (retrieval/judge.py): off unless asked for, and only with an LLM.
MEMORYHUB_JUDGE = os.environ.get("MEMORYHUB_JUDGE", "0").lower() in ("1", "true", "yes", "on")
MEMORYHUB_JUDGE_TIMEOUT_S = float(os.environ.get("MEMORYHUB_JUDGE_TIMEOUT_S", "1.5"))
MEMORYHUB_JUDGE_MODEL = os.environ.get("MEMORYHUB_JUDGE_MODEL", "")
MEMORYHUB_RETRIEVE_BUDGET_S = float(os.environ.get("MEMORYHUB_RETRIEVE_BUDGET_S", "2.0"))
MEMORYHUB_HYDE_TIMEOUT_S = float(os.environ.get("MEMORYHUB_HYDE_TIMEOUT_S", "1.2"))
MEMORYHUB_HYDE_N = int(os.environ.get("MEMORYHUB_HYDE_N", "3"))
# Full text skips query words found in more than this share of the memories a user can see
# (an IDF-style cut: such words rank nothing and cost a row check each), for groups of at
# least MIN_ROWS memories; beat refreshes the counts (retrieval/keyword_stats.py).
MEMORYHUB_KEYWORD_MAX_SHARE = float(os.environ.get("MEMORYHUB_KEYWORD_MAX_SHARE", "0.1"))
MEMORYHUB_KEYWORD_STATS_MIN_ROWS = env_int("MEMORYHUB_KEYWORD_STATS_MIN_ROWS", 100)
# Of the remaining words, rarest first, only as many as match about this many memories in all
# (the rarest always; 0: no limit): bounds the keyword stage's cost on large corpora.
MEMORYHUB_KEYWORD_ROW_BUDGET = env_int("MEMORYHUB_KEYWORD_ROW_BUDGET", 1000)

# --- API limits ----------------------------------------------------------------------
MEMORYHUB_MAX_CONTENT_CHARS = env_int("MEMORYHUB_MAX_CONTENT_CHARS", 8000)
MEMORYHUB_MAX_BULK = env_int("MEMORYHUB_MAX_BULK", 1000)
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MEMORYHUB_MAX_BODY_BYTES", 10 * 1024 * 1024)

# --- Capture limits and timings (see README "Capture") ---------------------------------
MEMORYHUB_MAX_CAPTURE_MESSAGES = env_int("MEMORYHUB_MAX_CAPTURE_MESSAGES", 200)
MEMORYHUB_MAX_MESSAGE_CHARS = env_int("MEMORYHUB_MAX_MESSAGE_CHARS", 32000)
MEMORYHUB_CAPTURE_WINDOW_CHARS = env_int("MEMORYHUB_CAPTURE_WINDOW_CHARS", 24000)
MEMORYHUB_CAPTURE_EXISTING_LIMIT = env_int("MEMORYHUB_CAPTURE_EXISTING_LIMIT", 100)
MEMORYHUB_CAPTURE_MAX_ATTEMPTS = env_int("MEMORYHUB_CAPTURE_MAX_ATTEMPTS", 3)
MEMORYHUB_CAPTURE_LLM_TIMEOUT = float(os.environ.get("MEMORYHUB_CAPTURE_LLM_TIMEOUT", "60"))
MEMORYHUB_CAPTURE_RETRY_SECONDS = float(os.environ.get("MEMORYHUB_CAPTURE_RETRY_SECONDS", "10"))
MEMORYHUB_CAPTURE_REQUEUE_QUEUED_AFTER = env_int("MEMORYHUB_CAPTURE_REQUEUE_QUEUED_AFTER", 60)
# Above the capture task's hard time limit (300 s), so a live job is never re-queued.
MEMORYHUB_CAPTURE_REQUEUE_RUNNING_AFTER = env_int("MEMORYHUB_CAPTURE_REQUEUE_RUNNING_AFTER", 360)
MEMORYHUB_SESSION_MESSAGES = env_int("MEMORYHUB_SESSION_MESSAGES", 50)
MEMORYHUB_SESSION_TTL_SECONDS = env_int("MEMORYHUB_SESSION_TTL_SECONDS", 24 * 3600)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
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
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
}

# --- Periodic work (Celery beat) -----------------------------------------------------
CELERY_BEAT_SCHEDULE = {
    "sweep-embeddings": {"task": "capture.tasks.sweep_embeddings", "schedule": 60.0},
    "sweep-capture-jobs": {"task": "capture.tasks.sweep_capture_jobs", "schedule": 30.0},
    "sweep-message-embeddings": {"task": "capture.tasks.sweep_message_embeddings", "schedule": 120.0},
    "refresh-keyword-stats": {"task": "retrieval.tasks.refresh_keyword_stats_task", "schedule": 600.0},
}
