"""Django settings for Ballast, read from the environment (12-factor style).

Environment:
- DATABASE_URL: ``sqlite:///path/to/file.sqlite3`` (default ``var/ballast.sqlite3``) or
  ``postgres://user@host:port/name`` (query options go to psycopg; ``?prepare_threshold=none``
  turns prepared statements off, see PREPARE_THRESHOLD).
- BALLAST_SECRET_KEY, BALLAST_DEBUG, BALLAST_ALLOWED_HOSTS (comma separated).
- BALLAST_Q_BROKER: ``orm`` (default) or ``redis``; BALLAST_REDIS_URL.
- BALLAST_CACHE_REDIS_URL (or BALLAST_REDIS_URL): the shared cache in Redis instead of the
  database (throttle counters live there).
- BALLAST_CHANNELS_REDIS_URL (or BALLAST_REDIS_URL): the channel layer in Redis, pushing
  live run events between processes; BALLAST_LIVE_POLL_SECONDS, BALLAST_LIVE_SAFETY_SECONDS.
- BALLAST_API_RATE_TOKEN, BALLAST_API_RATE_USER, BALLAST_TOKEN_FAILURE_RATE_ADDRESS,
  BALLAST_TOKEN_FAILURE_RATE_PREFIX: DRF rates (``N/second|minute|hour|day``).
- BALLAST_LOGIN_FAILURE_LIMIT, BALLAST_LOGIN_LOCKOUT_MINUTES: failed sign-ins (django-axes).
- BALLAST_LEASE_SECONDS (default 30): how long a worker's claim on a step lasts without
  a heartbeat.
- BALLAST_WORKER_STEP_THREADS (default 16): claimed steps one process runs at once, each on
  a thread with its own database connection; BALLAST_CANCEL_POLL_SECONDS (default 0.2):
  how soon a worker's running steps see that their run was cancelled.
- BALLAST_LIVE_OWNER_GRACE_SECONDS (default 60): how long past its expiry recovery leaves
  a lease whose owner certainly still runs on this host, or runs on a host whose heartbeat
  is fresh (a late heartbeat, not a lost worker).
- BALLAST_HOST_SILENT_SECONDS (default 3, at most 5 advised): a worker host whose heartbeat
  (written about twice a second by each qcluster's main process, on the database's clock)
  is older than this is dead: its leases are taken back without waiting for them to expire.
- BALLAST_PG_NETWORK_TIMEOUT_SECONDS (default 5; 0: the operating system's defaults): a
  PostgreSQL connection whose network is silent this long fails instead of hanging (libpq
  keepalives, tcp_user_timeout and connect_timeout; see pg_network_options).
- PROMETHEUS_MULTIPROC_DIR / BALLAST_METRICS_DIR, BALLAST_METRICS_ALLOW, BALLAST_METRICS_ADDRESS,
  BALLAST_METRICS_PORT: Prometheus metrics (see the block above LOGGING).
- BALLAST_LOG_FORMAT (plain or json), BALLAST_BUILD (core.build), OTEL_* (core.tracing):
  structured logs, the build recorded on each attempt, traces (README "Observability").
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("BALLAST_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool = False) -> bool:
    """Read a boolean environment variable ("1", "true", "yes", "on" are true)."""
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


# psycopg's own default. Django opens PostgreSQL connections with prepare_threshold=None
# (for connection poolers), and then psycopg prepares nothing, not even the engine's
# commit statement that asks for it (runs.engine.store.fastpath_postgresql). Django's cursors
# bind parameters on the client and never prepare, so this reaches only server-binding
# cursors: the engine's commit (prepared on first use) and, with the
# ``server_side_binding`` option, every query seen this many times on a connection.
PREPARE_THRESHOLD = 5


def _prepare_threshold(value: object) -> int | None:
    """``prepare_threshold`` from a DATABASE_URL query value: a count (0 or more), or
    ``none`` for no prepared statements (behind a pooler in transaction mode that cannot
    keep them, such as pgbouncer before 1.21). Raises ValueError for anything else."""
    text = str(value).strip().lower()
    if text in {"none", "null", "off", ""}:
        return None
    if not text.isdigit():
        raise ValueError(f"DATABASE_URL: prepare_threshold={value!r} is not a count of executions or 'none'")
    return int(text)


def orm_broker_class(database: dict) -> str:
    """The django-q2 broker class for the ORM broker on ``database`` (a DATABASES entry).
    Both drop a lost database connection at once (runs.engine.dispatch.ReconnectingOrmBroker,
    django-q2's own otherwise). On PostgreSQL a doorbell reaches an idle worker at once
    (LISTEN/NOTIFY), not after a poll; SQLite keeps polling every ``poll`` (0.05 s: an
    empty pull is one indexed read). Not behind a transaction pooler (preparing off): a
    LISTEN there stays on a server connection the pooler hands to other clients and no
    notification comes back (pgbouncer logs "got packet 'A' from server when not linked"),
    so workers would wait LISTEN_TIMEOUT on every empty pull instead of ``poll``."""
    if database["ENGINE"] != "django.db.backends.postgresql" or database["OPTIONS"].get("prepare_threshold") is None:
        return "runs.engine.dispatch.ReconnectingOrmBroker"
    return "runs.engine.dispatch.NotifyingOrmBroker"


# A worker host whose network is cut must not hang on its PostgreSQL sockets: libpq waits
# for an answer for as long as the kernel keeps retransmitting (about 15 minutes), so a
# thread blocked in a query on a cut host stayed blocked long after the link came back
# (retransmissions back off to many seconds), and that host's heartbeat and recovery
# stayed silent meanwhile. With these options a connection whose sent data goes
# unacknowledged for this long (tcp_user_timeout), or that is idle with a silent peer
# (keepalives), fails with OperationalError, and the caller reconnects. Only silence is
# punished: a slow query whose request was acknowledged waits as long as it takes.
PG_NETWORK_TIMEOUT_SECONDS = float(os.environ.get("BALLAST_PG_NETWORK_TIMEOUT_SECONDS", "5"))


def pg_network_options(seconds: float) -> dict[str, object]:
    """libpq options that make a PostgreSQL connection fail within about ``seconds`` of its
    network going silent: TCP keepalives on idle sockets (first probe after a third of it,
    then one a second until it is used up) and ``tcp_user_timeout`` (milliseconds) for
    sent data left unacknowledged, plus ``connect_timeout`` (libpq's minimum is 2 s).
    ``seconds`` <= 0: no options (the operating system's defaults)."""
    if seconds <= 0:
        return {}
    whole = max(1, round(seconds))
    idle = max(1, whole // 3)
    return {
        "keepalives": 1,
        "keepalives_idle": idle,
        "keepalives_interval": 1,
        "keepalives_count": max(1, whole - idle),
        "tcp_user_timeout": int(seconds * 1000),
        "connect_timeout": max(2, whole),
    }


def pg_server_network_options(seconds: float) -> str:
    """The same bound on the server's side of the connection, as libpq's ``options``
    (``-c`` settings for the session): keepalives and ``tcp_user_timeout`` of the backend.
    Why: a host cut off in the middle of a transaction leaves its backend idle in that
    transaction, holding its row locks (a run row, a step row) for as long as the server
    does not notice the client is gone (the kernel's keepalive default: two hours; in the
    chaos suite until the host came back), so recovery's take-back waited on those locks.
    Empty for ``seconds`` <= 0."""
    if seconds <= 0:
        return ""
    whole = max(1, round(seconds))
    idle = max(1, whole // 3)
    return (f"-c tcp_keepalives_idle={idle} -c tcp_keepalives_interval=1 -c tcp_keepalives_count={max(1, whole - idle)} "
            f"-c tcp_user_timeout={int(seconds * 1000)}")


def database_from_url(url: str) -> dict:
    """Turn a DATABASE_URL into a Django DATABASES entry.

    Supports ``sqlite:///relative/or/absolute/path`` and ``postgres[ql]://user:pass@host:port/db``.
    SQLite gets the options TRAPS.md asks for (WAL, IMMEDIATE transactions, a busy timeout)
    so concurrent claimers wait instead of failing with "database is locked".

    Raises ValueError for any other scheme.
    """
    parsed = urlparse(url)
    if parsed.scheme == "sqlite":
        raw = unquote(parsed.path)
        path = raw[1:] if raw.startswith("/") and not raw.startswith("//") else raw
        if url.startswith("sqlite:////"):
            path = raw
        name = Path(path) if Path(path).is_absolute() else BASE_DIR / path
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(name),
            "OPTIONS": {
                "timeout": 20,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
            "TEST": {"NAME": str(name.with_name(name.stem + "-test.sqlite3"))},
        }
    if parsed.scheme in {"postgres", "postgresql"}:
        # The URL's own query options win over the network timeouts' defaults.
        options: dict[str, object] = pg_network_options(PG_NETWORK_TIMEOUT_SECONDS) | {k: v[0] for k, v in parse_qs(parsed.query).items()}
        options["prepare_threshold"] = _prepare_threshold(options.get("prepare_threshold", str(PREPARE_THRESHOLD)))
        server_side = pg_server_network_options(PG_NETWORK_TIMEOUT_SECONDS)
        if server_side and options["prepare_threshold"] is not None:
            # Not behind a transaction pooler (preparing off): pgbouncer refuses an
            # ``options`` startup parameter, and its server connections are its own.
            # The URL's own ``-c`` settings come last, so they win.
            options["options"] = f"{server_side} {options.get('options', '')}".strip()
        return {
            # Behind a transaction pooler (preparing off) a named server-side cursor dies with
            # the transaction the pooler ends under it: .iterator() (the audit export and
            # verify) failed with InvalidCursorName. Django's documented switch for poolers.
            "DISABLE_SERVER_SIDE_CURSORS": options["prepare_threshold"] is None,
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")) or "postgres",
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            "CONN_MAX_AGE": 0,
            "OPTIONS": options,
            "TEST": {"NAME": os.environ.get("BALLAST_PG_TEST_NAME", "test_ballast")},
        }
    raise ValueError(f"DATABASE_URL: unsupported scheme {parsed.scheme!r} (use sqlite:// or postgres://)")


SECRET_KEY = os.environ.get("BALLAST_SECRET_KEY", "ballast-dev-insecure-key-change-me")
DEBUG = env_bool("BALLAST_DEBUG", True)
ALLOWED_HOSTS = [h for h in os.environ.get("BALLAST_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",") if h]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI / Redoc assets served locally (no CDN)
    "axes",  # failed sign-ins counted per user and per address, in the database
    "ballast",  # template tags (vite) and the browser app's pages
    "graphs",  # the graph format every other app builds on (graph, graph version)
    "audit",
    "accounts",
    "builder",
    "runs",
    "approvals",
    "triggers",  # webhook triggers per graph
    # After runs: runs' qcluster command (bounded graceful stop) replaces django-q2's.
    "django_q",
]

# A worker cluster (``manage.py qcluster``) runs steps and nothing else: it loads the apps
# that hold models and node kinds, not the web stack (daphne and Twisted, the admin and
# its autodiscovery, DRF, drf-spectacular, axes, sessions, messages, static files), so a
# restarted worker is ready in a fraction of a second (tests/runs/engine/test_worker_imports.py
# keeps those modules out of its import path). django-q2 forks its workers from this
# process after setup: they inherit exactly this.
BALLAST_WORKER_PROCESS = len(sys.argv) > 1 and sys.argv[1] == "qcluster" and os.environ.get("BALLAST_WORKER_FULL_APPS") != "1"
WORKER_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "graphs",
    "audit",
    "accounts",
    "builder",
    "runs",
    "approvals",
    # Its schedules are a due source the worker's claim fires (triggers.schedules).
    "triggers",
    "django_q",
]
if BALLAST_WORKER_PROCESS:
    INSTALLED_APPS = WORKER_APPS

MIDDLEWARE = [
    # First: /healthz and /readyz answer before host checks, redirects and sessions (a load
    # balancer probes by IP address; ballast/health.py).
    "ballast.health.HealthProbeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Keeps the request's W3C traceparent header: a run it starts joins the caller's trace (core.tracing).
    "core.tracing.TraceparentMiddleware",
    # Serves static files (the built front end included) from daphne/gunicorn in production.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Content-Security-Policy: scripts from the app's own origin only (ballast/csp.py).
    "ballast.csp.ContentSecurityPolicyMiddleware",
    # Last (django-axes asks for it): turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

# django-axes first: it refuses a locked-out user or address before any password is
# checked, then Django's model backend checks the password.
AUTHENTICATION_BACKENDS = [
    "accounts.throttling.SignInLockoutBackend",  # django-axes
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "ballast.urls"
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
            ]
        },
    }
]
WSGI_APPLICATION = "ballast.wsgi.application"
ASGI_APPLICATION = "ballast.asgi.application"

DATABASES = {"default": database_from_url(os.environ.get("DATABASE_URL", "sqlite:///var/ballast.sqlite3"))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The cache every web and worker process shares: throttle counters (API rates, failed
# token authentications) must be seen by all of them, never kept in one process's
# memory. Default: a table in the project's database (created by ``migrate``, see
# accounts.apps); with BALLAST_CACHE_REDIS_URL (or BALLAST_REDIS_URL) set, Redis, and
# that table (alias "database") while Redis does not answer (accounts.throttling).
_CACHE_REDIS_URL = os.environ.get("BALLAST_CACHE_REDIS_URL") or os.environ.get("BALLAST_REDIS_URL")
_DATABASE_CACHE = {
    "BACKEND": "django.core.cache.backends.db.DatabaseCache",
    "LOCATION": "ballast_cache",
    # Culling scans the table; counters expire on their own, so keep it rare.
    "OPTIONS": {"MAX_ENTRIES": 100_000, "CULL_FREQUENCY": 4},
}
if _CACHE_REDIS_URL:
    CACHES: dict[str, dict[str, Any]] = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": _CACHE_REDIS_URL,
            "KEY_PREFIX": os.environ.get("BALLAST_CACHE_KEY_PREFIX", "ballast"),
            # A Redis that does not answer costs a request at most this long (then the
            # counters go to the database cache, see accounts.throttling).
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        },
        "database": _DATABASE_CACHE,
    }
else:
    CACHES = {"default": _DATABASE_CACHE}

AUTH_PASSWORD_VALIDATORS: list[dict] = []
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# The built browser app (frontend/dist, made by `npm run build`): its manifest.json names the
# hashed asset files that the {% vite_entry %} tag emits.
BALLAST_FRONTEND_DIST = Path(os.environ.get("BALLAST_FRONTEND_DIST", BASE_DIR / "frontend" / "dist"))
STATICFILES_DIRS = [BASE_DIR / "static", BALLAST_FRONTEND_DIST]
# collectstatic's target, which whitenoise serves when DEBUG is off. Created here so the
# middleware does not warn before the first collectstatic; the image sets its own path.
STATIC_ROOT = Path(os.environ.get("BALLAST_STATIC_ROOT", VAR_DIR / "staticfiles"))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Gzip and Brotli copies next to each file; names unchanged (Vite hashes its own).
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Vite's output names carry a content hash (assets/<name>-<8 chars>.<ext>): cache them forever.
WHITENOISE_IMMUTABLE_FILE_TEST = r"/assets/[^/]+-[A-Za-z0-9_-]{8}\.[a-z0-9]+(\.map)?$"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

EMAIL_BACKEND = os.environ.get("BALLAST_EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = os.environ.get("BALLAST_FROM_EMAIL", "ballast@localhost")
# Where people reach this Ballast: the links in the emails it sends (run alerts, approval requests) start with it.
BALLAST_PUBLIC_URL = os.environ.get("BALLAST_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")

# API: token auth first so an anonymous request gets 401 with WWW-Authenticate; session
# auth (CSRF enforced by DRF for session-authenticated unsafe methods) for the browser.
REST_FRAMEWORK: dict[str, Any] = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_PAGINATION_CLASS": "core.api.Pagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "core.api.exception_handler",
    # Every API request counts against its token (scope "token") or, signed in by
    # session, its user ("user"); counters live in the shared cache (CACHES).
    "DEFAULT_THROTTLE_CLASSES": ["accounts.throttling.ApiRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {
        "token": os.environ.get("BALLAST_API_RATE_TOKEN", "1200/minute"),
        "user": os.environ.get("BALLAST_API_RATE_USER", "2400/minute"),
        # Failed token authentications (a wrong, revoked or malformed key), counted per
        # client address and per token prefix presented: past the rate, 429.
        "token_failure_address": os.environ.get("BALLAST_TOKEN_FAILURE_RATE_ADDRESS", "20/minute"),
        "token_failure_prefix": os.environ.get("BALLAST_TOKEN_FAILURE_RATE_PREFIX", "10/minute"),
        # Deliveries to one webhook trigger (triggers app), accepted or not: past the rate, 429.
        "webhook": os.environ.get("BALLAST_WEBHOOK_RATE", "120/minute"),
        # Deliveries to tokens that name no webhook, per client address: past the rate, 429.
        "webhook_unknown": os.environ.get("BALLAST_WEBHOOK_UNKNOWN_RATE", "60/minute"),
    },
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # Behind N reverse proxies, the client is N addresses back in X-Forwarded-For.
    "NUM_PROXIES": int(os.environ["BALLAST_NUM_PROXIES"]) if os.environ.get("BALLAST_NUM_PROXIES") else None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Ballast API",
    "DESCRIPTION": "Graphs, versions, runs, steps, events, approvals, costs and the audit log of Ballast, "
    "a durable runtime for AI agents. Authenticate with `Authorization: Token <key>` "
    "(`manage.py create_token`) or a session cookie.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "core.api.add_error_responses"],
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "runs.models.RunStatus",
        "StepStatusEnum": "runs.models.StepStatus",
        "ApprovalStatusEnum": "approvals.models.ApprovalStatus",
        "AttemptStatusEnum": "runs.models.AttemptStatus",
        "RunEventKindEnum": "runs.models.RunEventKind",
        "ProviderKindEnum": "runs.models.ProviderKind",
        "WaitingForEnum": "runs.selectors.WAITING_FOR",
        "SourceKindEnum": "builder.validation.SOURCE_KINDS",  # expressions/check and draft/preview
        "PreviewErrorCodeEnum": "builder.preview.ERROR_CODES",
        "PreviewValueTypeEnum": "builder.preview.VALUE_TYPES",
        "CallbackEventEnum": "triggers.models.CallbackEvent",
        "CallbackDeliveryStatusEnum": "triggers.models.DeliveryStatus",
    },
}
# Failed sign-ins (login page, admin): django-axes counts them in its own tables (shared
# by every process), per username and, separately, per client address; at the limit
# the user (or the address) is locked out for the cool-off and gets a 429 page. A
# successful sign-in clears that user's count. Each failure is also in the audit log
# (accounts.authentication), and so is each lockout.
AXES_FAILURE_LIMIT = int(os.environ.get("BALLAST_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = float(os.environ.get("BALLAST_LOGIN_LOCKOUT_MINUTES", "15")) / 60  # hours
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "ballast.pages.lockout_response"  # the sign-in page's look, 429, Retry-After
AXES_VERBOSE = False
# The same client address as the API's throttles (REMOTE_ADDR, or BALLAST_NUM_PROXIES back
# in X-Forwarded-For).
AXES_CLIENT_IP_CALLABLE = "accounts.throttling.client_address"

# API tokens: a used token's last_used_at is written at most this often (seconds).
BALLAST_TOKEN_TOUCH_SECONDS = 60

# Live run events (runs.engine.store.events, runs.live.hub): the database is the source. With
# BALLAST_CHANNELS_REDIS_URL (or BALLAST_REDIS_URL) set, commits also push their events
# through Redis to every web process (low latency) and the web process's one shared poller
# only checks for gaps every BALLAST_LIVE_SAFETY_SECONDS; without Redis that poller reads
# new events every BALLAST_LIVE_POLL_SECONDS (the in-memory layer cannot reach another
# process).
_CHANNELS_REDIS_URL = os.environ.get("BALLAST_CHANNELS_REDIS_URL") or os.environ.get("BALLAST_REDIS_URL")
if _CHANNELS_REDIS_URL:
    # channels-redis blocks 5 s per read (BZPOPMIN, its brpop_timeout) and redis-py 6+
    # times a socket out after 5 s by default: the read raced the time-out and idle
    # sockets died with 1011 every 5-16 s. The socket time-out stays above the blocking
    # read (a healthy Redis always answers within it; a vanished one is noticed in 15 s),
    # keepalive and a health check on connections idle for 10 s find a dead server early.
    _CHANNELS_HOST = {
        "address": _CHANNELS_REDIS_URL,
        "socket_timeout": 15,
        "socket_connect_timeout": 2,
        "socket_keepalive": True,
        "health_check_interval": 10,
    }
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [_CHANNELS_HOST]}}}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
BALLAST_LIVE_PUSH = bool(_CHANNELS_REDIS_URL)
BALLAST_LIVE_POLL_SECONDS = float(os.environ.get("BALLAST_LIVE_POLL_SECONDS", "0.2"))
BALLAST_LIVE_SAFETY_SECONDS = float(os.environ.get("BALLAST_LIVE_SAFETY_SECONDS", "1.0"))

# django-q2 is the doorbell that wakes the engine; the database is the truth (TRAPS.md).
# Delivery is at least once; every task claims the step due longest in Ballast's tables
# (runs.engine.dispatch), so a duplicate delivery does nothing and broker order does not
# matter. timeout < retry keeps django-q2 from re-delivering a healthy long task;
# ack_failures keeps a failed task from looping. A step may take minutes or hours (an LLM
# call, a slow tool): its lease is extended by heartbeats, not by django-q2; the task's
# `timeout` bounds one doorbell's work, so a node that may run longer sets its own
# timeout_seconds below it (or raise BALLAST_Q_TIMEOUT and BALLAST_Q_RETRY together).
_Q_BROKER = os.environ.get("BALLAST_Q_BROKER", "orm")
Q_CLUSTER = {
    "name": os.environ.get("BALLAST_Q_NAME", "ballast"),
    "workers": int(os.environ.get("BALLAST_WORKERS", "2")),
    "timeout": int(os.environ.get("BALLAST_Q_TIMEOUT", "3600")),
    "retry": int(os.environ.get("BALLAST_Q_RETRY", "3660")),
    "queue_limit": int(os.environ.get("BALLAST_Q_QUEUE_LIMIT", "4")),
    "max_attempts": 1,
    "ack_failures": True,
    "save_limit": -1,  # no success rows: Ballast's own tables are the truth (and saving them costs a lock per task)
    "poll": float(os.environ.get("BALLAST_Q_POLL", "0.05")),
    "catch_up": False,
    "label": "Task queue",
}
if _Q_BROKER == "redis":
    Q_CLUSTER["redis"] = os.environ.get("BALLAST_REDIS_URL", "redis://127.0.0.1:6379/0")
    # django-q2's Redis broker whose pusher waits out a Redis outage (runs.engine.dispatch).
    Q_CLUSTER["broker_class"] = "runs.engine.dispatch.RedisBroker"
else:
    Q_CLUSTER["orm"] = "default"
    Q_CLUSTER["broker_class"] = orm_broker_class(DATABASES["default"])

# Engine settings (runs.engine.*).
BALLAST_LEASE_SECONDS = float(os.environ.get("BALLAST_LEASE_SECONDS", "30"))
BALLAST_LIVE_OWNER_GRACE_SECONDS = float(os.environ.get("BALLAST_LIVE_OWNER_GRACE_SECONDS", "60"))
BALLAST_RECOVERY_INTERVAL = float(os.environ.get("BALLAST_RECOVERY_INTERVAL", "1.0"))
# How late a schedule's tick may fire and still run under the "skip" missed-tick policy
# (seconds, database clock; triggers.firing).
BALLAST_SCHEDULE_MISFIRE_GRACE_SECONDS = float(os.environ.get("BALLAST_SCHEDULE_MISFIRE_GRACE_SECONDS", "60"))
# Completion callbacks (triggers.callback_sending): one send's timeout per network phase,
# how long a claimed delivery is held, attempts before it is undeliverable, and the first
# retry's wait (doubling each attempt, at most an hour). Seconds, database clock.
BALLAST_CALLBACK_TIMEOUT_SECONDS = float(os.environ.get("BALLAST_CALLBACK_TIMEOUT_SECONDS", "10"))
BALLAST_CALLBACK_LEASE_SECONDS = float(os.environ.get("BALLAST_CALLBACK_LEASE_SECONDS", "60"))
BALLAST_CALLBACK_MAX_ATTEMPTS = int(os.environ.get("BALLAST_CALLBACK_MAX_ATTEMPTS", "8"))
BALLAST_CALLBACK_BACKOFF_SECONDS = float(os.environ.get("BALLAST_CALLBACK_BACKOFF_SECONDS", "5"))
BALLAST_HOST_SILENT_SECONDS = float(os.environ.get("BALLAST_HOST_SILENT_SECONDS", "3"))
# Seconds a worker that answered a doorbell goes on claiming the next due step (parallel
# branches without a broker round trip each; runs.engine.loop.execute_due), and after that
# for as long as a step of that task still runs on one of its step threads. 0: one step
# (and its kept successors) per doorbell. Keep it far below Q_CLUSTER["timeout"].
BALLAST_DOORBELL_DRAIN_SECONDS = float(os.environ.get("BALLAST_DOORBELL_DRAIN_SECONDS", "5"))
# How many claimed steps one process runs at once, each (with the successors its commits
# keep for it) on a thread of its own: parallel branches of node code that waits on I/O
# (model calls, tools) overlap in one worker process and in in-process runs
# (runs.engine.loop). Each run's own max_parallelism bounds it further; every such thread
# holds its own database connection, so a qcluster holds up to workers x this many.
# 1: one step at a time per process.
BALLAST_WORKER_STEP_THREADS = int(os.environ.get("BALLAST_WORKER_STEP_THREADS", "16"))
if BALLAST_WORKER_STEP_THREADS < 1:
    raise ValueError(f"BALLAST_WORKER_STEP_THREADS={BALLAST_WORKER_STEP_THREADS}: at least 1")
# Seconds between checks, while a process runs steps, of whether their runs were
# cancelled (one indexed read for all of them): a cancel reaches running node code (its
# cancel event, the outbound call it waits on) within about this long.
BALLAST_CANCEL_POLL_SECONDS = float(os.environ.get("BALLAST_CANCEL_POLL_SECONDS", "0.2"))
# A step interrupted this many times (its worker died each time) fails instead of looping.
BALLAST_MAX_LOST_ATTEMPTS = int(os.environ.get("BALLAST_MAX_LOST_ATTEMPTS", "5"))
# A worker process holding more than this many threads of steps that overran their
# timeout_seconds (Python cannot kill a thread) is recycled after its current task.
BALLAST_MAX_ABANDONED_STEPS = int(os.environ.get("BALLAST_MAX_ABANDONED_STEPS", "2"))
# Seconds a stopping qcluster (SIGTERM or SIGINT, to its main process or its whole process
# group) gives in-flight steps to finish; then its workers are killed and their leases
# handed back at once (recovery re-queues or parks them). Keep it below the stop timeout
# of whatever supervises the worker (docker: 10 s, systemd: 90 s).
BALLAST_STOP_GRACE_SECONDS = float(os.environ.get("BALLAST_STOP_GRACE_SECONDS", "8"))
# Seconds a worker whose database connection was lost with a finished step in hand goes
# on reconnecting and trying the same fenced commit again (a restart, a failover, a pooler
# recycling connections) before it gives up and the step's lease runs out instead
# (runs.engine.store.reconnect).
BALLAST_COMMIT_RETRY_SECONDS = float(os.environ.get("BALLAST_COMMIT_RETRY_SECONDS", "30"))
# Seconds a qcluster worker (and its monitor and pusher) keeps a database connection
# (CONN_MAX_AGE in those processes only, with health checks; "none": for the process's
# lifetime; 0: a new connection per task and per queue poll, Django's default). Web
# processes keep CONN_MAX_AGE=0. No connection crosses django-q2's forks
# (runs/engine/cluster.py).
_worker_age = os.environ.get("BALLAST_WORKER_CONN_MAX_AGE", "600").strip().lower()
if _worker_age not in {"none", "null", ""} and not _worker_age.isdigit():
    raise ValueError(f"BALLAST_WORKER_CONN_MAX_AGE={_worker_age!r}: seconds (0 or more) or 'none'")
BALLAST_WORKER_CONN_MAX_AGE = None if _worker_age in {"none", "null", ""} else int(_worker_age)

# The largest run state (UTF-8 bytes of its JSON, summed per key) a commit may leave; a
# step whose writes would pass it fails with state_too_large. 0 turns the limit off.
BALLAST_MAX_STATE_BYTES = int(os.environ.get("BALLAST_MAX_STATE_BYTES", str(8 * 1024 * 1024)))


def _days(name: str, default: int | None) -> int | None:
    """A retention setting in whole days: unset gives ``default``; "" or "0" keeps forever
    (None); anything else must be a positive integer (a bad value stops the process here)."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    if raw.strip() in ("", "0"):
        return None
    value = int(raw)
    if value < 0:
        raise ValueError(f"{name} must be a positive number of days, 0 or empty (keep forever)")
    return value


# Retention (runs.retention, README "Retention"): how many days a finished run (succeeded,
# failed, cancelled) is kept after it finished. A graph's own ``retention_days`` overrides
# BALLAST_RETENTION_DAYS (default: keep forever). One-node test runs from the builder and
# their snapshot versions: BALLAST_TEST_RUN_RETENTION_DAYS (default 7). The audit chain of a
# pruned run: BALLAST_AUDIT_RETENTION_DAYS after its last entry (default: keep forever).
BALLAST_RETENTION_DAYS = _days("BALLAST_RETENTION_DAYS", None)
BALLAST_TEST_RUN_RETENTION_DAYS = _days("BALLAST_TEST_RUN_RETENTION_DAYS", 7)
BALLAST_AUDIT_RETENTION_DAYS = _days("BALLAST_AUDIT_RETENTION_DAYS", None)
BALLAST_RETENTION_BATCH = int(os.environ.get("BALLAST_RETENTION_BATCH", "200"))
# With BALLAST_AUDIT_RETENTION_DAYS set, long-lived audit chains (graph:, user:, auth, ...)
# lose their entries older than that, cut at checkpoints, this many entries per transaction.
BALLAST_AUDIT_CUT_BATCH = int(os.environ.get("BALLAST_AUDIT_CUT_BATCH", "1000"))
# The retention job (runs.retention_job): the engine fires it every
# BALLAST_RETENTION_INTERVAL_SECONDS (default a day; 0 turns it off, leaving
# `manage.py prune_runs` to cron), at most BALLAST_RETENTION_MAX_BATCHES batches per firing
# (so one worker is busy with it for a few batches only); while runs are left it fires again
# a couple of seconds later.
BALLAST_RETENTION_INTERVAL_SECONDS = float(os.environ.get("BALLAST_RETENTION_INTERVAL_SECONDS", "86400"))
BALLAST_RETENTION_MAX_BATCHES = int(os.environ.get("BALLAST_RETENTION_MAX_BATCHES", "5"))
# Node kinds are plugins: kind -> dotted path of a NodeKind subclass, imported lazily.
# The approval kind lives in the approvals app; runs never imports approvals.
BALLAST_NODE_KINDS = {
    "start": "runs.nodes.start.StartNode",
    "end": "runs.nodes.end.EndNode",
    "transform": "runs.nodes.transform.TransformNode",
    "condition": "runs.nodes.condition.ConditionNode",
    "join": "runs.nodes.join.JoinNode",
    "tool": "runs.nodes.tool.ToolNode",
    "llm": "runs.nodes.llm.LLMNode",
    "approval": "approvals.nodes.ApprovalNode",
    "agent": "runs.nodes.agent.AgentNode",
    "subgraph": "runs.subgraphs.node.SubgraphNode",
}
# How deep graph calls (subgraph nodes) may nest: a child of a child ... counts each level.
BALLAST_SUBGRAPH_MAX_DEPTH = int(os.environ.get("BALLAST_SUBGRAPH_MAX_DEPTH", "8"))
# Extra kinds (plugins, tests): BALLAST_EXTRA_NODE_KINDS="kind=dotted.Path,other=..."
BALLAST_NODE_KINDS.update(
    dict(item.split("=", 1) for item in os.environ.get("BALLAST_EXTRA_NODE_KINDS", "").split(",") if "=" in item)
)
# Where a step that is not safe to repeat is parked after a crash (a person decides).
BALLAST_PARK_HANDLER = "approvals.services.recovery_request_create"
# Modules imported for their @tool registrations (built-ins first).
BALLAST_TOOL_MODULES = ["runs.tools.builtins", "runs.tools.demo"] + [
    m for m in os.environ.get("BALLAST_EXTRA_TOOL_MODULES", "").split(",") if m
]
# Outbound requests of tools (runs.tools.outbound): loopback, private, link-local (cloud
# metadata), multicast and other non-public addresses are refused unless listed here
# (comma separated IP addresses, CIDR networks, host names or *.suffixes). Provider base
# URLs are not affected. Responses bigger than the byte cap fail the step.
BALLAST_OUTBOUND_ALLOW = [e.strip() for e in os.environ.get("BALLAST_OUTBOUND_ALLOW", "").split(",") if e.strip()]
BALLAST_OUTBOUND_MAX_RESPONSE_BYTES = int(os.environ.get("BALLAST_OUTBOUND_MAX_RESPONSE_BYTES", str(10 * 1024 * 1024)))
BALLAST_OUTBOUND_MAX_REDIRECTS = int(os.environ.get("BALLAST_OUTBOUND_MAX_REDIRECTS", "5"))
# MCP servers added in the app (runs.tools.mcp_servers): the stdio commands an operator
# allows them to run (exact strings, comma separated; empty: no stdio server may be added),
# and the bounds of a connection (start or reach + handshake) and of one tool call, seconds.
BALLAST_MCP_STDIO_COMMANDS = [c.strip() for c in os.environ.get("BALLAST_MCP_STDIO_COMMANDS", "").split(",") if c.strip()]
BALLAST_MCP_CONNECT_TIMEOUT = float(os.environ.get("BALLAST_MCP_CONNECT_TIMEOUT", "10"))
BALLAST_MCP_CALL_TIMEOUT = float(os.environ.get("BALLAST_MCP_CALL_TIMEOUT", "60"))
# Seconds an MCP session (a stdio server's process) is kept open after a call for the next
# one in the same process (runs.tools.mcp_servers.pool); 0: a session per call.
BALLAST_MCP_SESSION_IDLE_SECONDS = float(os.environ.get("BALLAST_MCP_SESSION_IDLE_SECONDS", "60"))
BALLAST_PROVIDERS = {
    "mock": "runs.providers.mock.MockProvider",
    "openai": "runs.providers.openai_provider.OpenAIProvider",
    "anthropic": "runs.providers.anthropic_provider.AnthropicProvider",
}
# Per provider name: runs.providers.sdk.SDKSettings (base_url, api_key_env,
# allowed_api_key_envs, timeout, price_provider, ...). Keys are read from the environment
# at call time (OPENAI_API_KEY, ANTHROPIC_API_KEY or the variable a node names, if
# allowed here); a key never belongs in a graph.
BALLAST_PROVIDER_SETTINGS: dict[str, dict] = {
    "openai": {
        "base_url": os.environ.get("BALLAST_OPENAI_BASE_URL") or None,
        "price_provider": os.environ.get("BALLAST_OPENAI_PRICE_PROVIDER") or None,
        "timeout": float(os.environ.get("BALLAST_LLM_TIMEOUT", "120")),
    },
    "anthropic": {
        "base_url": os.environ.get("BALLAST_ANTHROPIC_BASE_URL") or None,
        "price_provider": os.environ.get("BALLAST_ANTHROPIC_PRICE_PROVIDER") or None,
        "timeout": float(os.environ.get("BALLAST_LLM_TIMEOUT", "120")),
    },
}
# OpenAI-compatible servers (Ollama, vLLM, LM Studio, OpenRouter, Groq, Together), as JSON:
# BALLAST_OPENAI_COMPATIBLE='{"ollama": {"base_url": "http://127.0.0.1:11434/v1",
# "api_key_required": false}, "groq": {"base_url": "https://api.groq.com/openai/v1",
# "api_key_env": "GROQ_API_KEY"}}'. Each name becomes a provider nodes can use.
BALLAST_PROVIDERS_FROM_ENV: list[str] = []  # names defined by BALLAST_OPENAI_COMPATIBLE (listed as "environment")
for _name, _config in json.loads(os.environ.get("BALLAST_OPENAI_COMPATIBLE") or "{}").items():
    BALLAST_PROVIDERS[_name] = "runs.providers.openai_provider.OpenAIProvider"
    BALLAST_PROVIDER_SETTINGS[_name] = _config
    BALLAST_PROVIDERS_FROM_ENV.append(_name)
# Providers added in the app (runs.providers.credentials) keep their API keys encrypted
# with Fernet. BALLAST_CREDENTIALS_KEY: one or more Fernet keys, comma separated; the
# first encrypts, every one decrypts (rotation: put a new key first, run
# ``manage.py rotate_credentials``, then drop the old one). Unset: a key generated once
# into BALLAST_CREDENTIALS_KEY_FILE (fine for one machine; set the variable when several
# machines share the database).
BALLAST_CREDENTIALS_KEY = os.environ.get("BALLAST_CREDENTIALS_KEY", "")
BALLAST_CREDENTIALS_KEY_FILE = VAR_DIR / "credentials-key.txt"
# Seconds a "Test connection" (admin button, POST /api/v1/providers/<name>/test/) may take.
BALLAST_PROVIDER_TEST_TIMEOUT = float(os.environ.get("BALLAST_PROVIDER_TEST_TIMEOUT", "15"))

# Prometheus metrics (core.metrics, ballast.metrics; README "Metrics").
# - Multiprocess mode: ``serve`` and ``qcluster`` run several processes on a host, which
#   write their values into one directory per host (prometheus-client's standard
#   PROMETHEUS_MULTIPROC_DIR); unless the environment names one, those two commands use
#   BALLAST_METRICS_DIR (default var/metrics). It must be set before prometheus-client is
#   first imported, hence here. Web hosts running several daphne processes set
#   PROMETHEUS_MULTIPROC_DIR themselves.
# - BALLAST_METRICS_ALLOW: client addresses or CIDR networks (comma separated; REMOTE_ADDR,
#   never a forwarded header) that may read the web's /metrics without a token; anyone
#   else needs a staff user's API token, as for /readyz?detail=1.
# - BALLAST_METRICS_ADDRESS (default 127.0.0.1) and BALLAST_METRICS_PORT (default 0: off):
#   a worker host's own endpoint, served by the qcluster's main process.
BALLAST_METRICS_DIR = Path(os.environ.get("BALLAST_METRICS_DIR", VAR_DIR / "metrics"))
if len(sys.argv) > 1 and sys.argv[1] in {"serve", "qcluster"} and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(BALLAST_METRICS_DIR)
if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    # prometheus-client opens a file there for each metric a process creates, on import.
    Path(os.environ["PROMETHEUS_MULTIPROC_DIR"]).mkdir(parents=True, exist_ok=True)
BALLAST_METRICS_ALLOW = [e.strip() for e in os.environ.get("BALLAST_METRICS_ALLOW", "").split(",") if e.strip()]
BALLAST_METRICS_ADDRESS = os.environ.get("BALLAST_METRICS_ADDRESS", "127.0.0.1")
BALLAST_METRICS_PORT = int(os.environ.get("BALLAST_METRICS_PORT", "0"))

# BALLAST_LOG_FORMAT: ``plain`` (default) or ``json``: one JSON object per line with the
# run, step, attempt, worker and trace id of the step in hand and the build
# (core.log_context; README "Observability").
BALLAST_LOG_FORMAT = os.environ.get("BALLAST_LOG_FORMAT", "plain").strip().lower() or "plain"
if BALLAST_LOG_FORMAT not in {"plain", "json"}:
    raise ValueError(f"BALLAST_LOG_FORMAT must be plain or json, not {BALLAST_LOG_FORMAT!r}")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(levelname)s %(name)s %(message)s %(run_id)s %(step_id)s %(attempt)s %(worker)s %(trace_id)s %(build)s",
            "rename_fields": {"levelname": "level", "name": "logger"},
            "timestamp": "time",  # ISO 8601, UTC
        },
    },
    "filters": {"step_fields": {"()": "core.log_context.StepFields"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": BALLAST_LOG_FORMAT, "filters": ["step_fields"]}},
    "loggers": {
        "ballast": {"handlers": ["console"], "level": os.environ.get("BALLAST_LOG_LEVEL", "INFO")},
        # django-q2 logs under "django-q" (with a hyphen; TRAPS.md): its INFO lines (cluster
        # start, task enqueued) stay out of CLI output unless BALLAST_Q_LOG_LEVEL asks.
        "django-q": {"handlers": ["console"], "level": os.environ.get("BALLAST_Q_LOG_LEVEL", "WARNING"), "propagate": False},
    },
}
