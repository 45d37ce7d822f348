"""Settings for the review dashboard.

Every setting an operator may change is read from the environment through the
small helpers below. With no environment at all the app runs on one machine:
SQLite in DATA_DIR and the embedded Redis-compatible server that
``manage.py serve`` starts.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from celery.schedules import crontab
from csp.constants import NONE, SELF

from emulator import DEFAULT_REQUEST_BUDGET

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    """The variable's value, or ``default`` when it is unset or empty."""
    value = os.environ.get(name, "")
    return value if value.strip() else default


def env_bool(name: str, default: bool = False) -> bool:
    """True for 1/true/yes/on, False for 0/false/no/off (case-insensitive)."""
    value = env_str(name).lower()
    if not value:
        return default
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"{name}={value!r}: use one of 1, true, yes, on, 0, false, no, off")


def env_int(name: str, default: int) -> int:
    """An integer variable; a clear error names the variable when it is not one."""
    value = env_str(name)
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r}: expected a whole number") from None


def env_list(name: str, default: list[str]) -> list[str]:
    """A comma-separated list; blanks are dropped."""
    value = env_str(name)
    if not value:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


DATA_DIR = Path(env_str("DATA_DIR", str(BASE_DIR / "var"))).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """SECRET_KEY from the environment, else one generated once and kept in DATA_DIR."""
    from_env = env_str("SECRET_KEY")
    if from_env:
        return from_env
    path = DATA_DIR / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        key = secrets.token_urlsafe(50)
        # O_EXCL: when two processes start at once, exactly one writes the key.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return path.read_text().strip()
        with os.fdopen(fd, "w") as fh:
            fh.write(key)
        return key


def _redis_url() -> str:
    """REDIS_URL, else the embedded server's address that ``serve`` records."""
    from_env = env_str("REDIS_URL")
    if from_env:
        return from_env
    try:
        return (DATA_DIR / "valkey" / "url").read_text().strip()
    except FileNotFoundError:
        # Nothing is listening here until `manage.py serve` starts the embedded
        # server; /healthz then reports redis as unreachable.
        return "redis://127.0.0.1:6399/0"


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG", False)
# Django's test setup adds "testserver" itself; a running app never needs it.
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# HTTPS, for a deployment behind a TLS proxy (docs/operations.md): all off by
# default, since `serve` on one machine speaks plain HTTP on loopback.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
# The proxy says the request came over HTTPS with X-Forwarded-Proto: https.
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# /healthz and /readyz answer probes over plain HTTP inside the cluster.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "csp",
    "django_prometheus",
    "reviewer",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # Before CSRF, which reads a POST's form (and so its files) to find the token.
    "reviewer.ops.uploads.UploadLimitMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
    # Last, as django-axes asks: it answers locked-out logins.
    "axes.middleware.AxesMiddleware",
]

# Content-Security-Policy (django-csp): scripts only from our own files, never
# inline; styles may be inline because plotly positions its figures with them;
# websockets to the page's own origin ('self' covers ws: and wss: there).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, "'unsafe-inline'"],
        "img-src": [SELF, "data:", "blob:"],
        "font-src": [SELF, "data:"],
        "connect-src": [SELF],
        "worker-src": [SELF, "blob:"],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    },
}

# Logins: django-axes locks a username at one address out after
# LOGIN_FAILURE_LIMIT wrong passwords, for LOGIN_LOCKOUT_MINUTES (429).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_ENABLED = env_bool("LOGIN_LOCKOUT", True)
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15))
# Per account (from one address) and per address: one password sprayed over many
# usernames from one address is locked out too.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
AXES_RESET_ON_SUCCESS = True
# Behind a proxy, set AXES_IPWARE_PROXY_COUNT so the client's address is used.
AXES_IPWARE_PROXY_COUNT = env_int("AXES_IPWARE_PROXY_COUNT", 0) or None


def env_rate(name: str, default: str) -> str | None:
    """A DRF throttle rate ("30/s", "600/min"); "off" turns the throttle off."""
    value = env_str(name, default)
    return None if value.lower() == "off" else value

ROOT_URLCONF = "reviewer.urls"
ASGI_APPLICATION = "reviewer.asgi.application"

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
                "reviewer.views.context_processors.inbox",
            ],
        },
    },
]

_default_db = f"sqlite:///{DATA_DIR / 'db.sqlite3'}"
DATABASES = {"default": dj_database_url.parse(env_str("DATABASE_URL", _default_db), conn_max_age=0)}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web, Celery and websocket processes write the same file at once: WAL lets
    # readers run beside a writer, the timeout makes writers wait for the lock,
    # and IMMEDIATE transactions take it up front instead of failing mid-way.
    # The backend queues one process's writers for the lock in turn
    # (reviewer/ops/sqlite_backend), so no request waits seconds for it by bad luck.
    DATABASES["default"]["ENGINE"] = "reviewer.ops.sqlite_backend"
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
    }
    # A file, not memory, so that test servers and Celery workers started as
    # subprocesses share it; one per test process so that two runs never meet.
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / f"test-db-{os.getpid()}.sqlite3")}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"
SERVE_STATIC = env_bool("SERVE_STATIC", True)

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

REDIS_URL = _redis_url()

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # redis-py 8 gives sockets a 5 s read timeout by default, shorter than
        # the layer's blocking 5 s pop: every idle websocket would drop. None
        # lets the server-side timeout decide, as before redis-py 8.
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": None}],
            "capacity": 1500,
            "expiry": 30,
        },
    }
}

CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = REDIS_URL
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# A task is acknowledged when it ends, so a run whose worker dies is delivered
# again instead of vanishing.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT_S", 3600)}
# Re-anchoring a revised doc's findings runs in workers of its own queue
# (serve starts one), so it never waits behind runs nor takes a run's slot.
DOCS_QUEUE = "docs"
# The break pass's measured advice (seconds of emulator runs per fleet config
# version) is worked out there too, never in the web process.
CELERY_TASK_ROUTES = {"reviewer.reanchor_revision": {"queue": DOCS_QUEUE},
                      "reviewer.break_advice": {"queue": DOCS_QUEUE},
                      "reviewer.fleet_analysis": {"queue": DOCS_QUEUE},
                      "reviewer.placement_answer": {"queue": DOCS_QUEUE},
                      "reviewer.trace_upload": {"queue": DOCS_QUEUE}}
REANCHOR_IN_BACKGROUND = env_bool("REANCHOR_IN_BACKGROUND", True)
# A re-anchoring task's soft and hard time limits (seconds; 1,900 findings on a
# 3,000-sentence doc take under a second). It works in slices of
# REANCHOR_SLICE_S, then sends the rest to the back of the docs queue, so other
# users' re-anchoring and break-advice jobs are not stuck behind a big one.
REANCHOR_SOFT_TIME_LIMIT_S = env_int("REANCHOR_SOFT_TIME_LIMIT_S", 120)
REANCHOR_TIME_LIMIT_S = env_int("REANCHOR_TIME_LIMIT_S", 150)
REANCHOR_SLICE_S = env_int("REANCHOR_SLICE_S", 10)
BREAK_ADVICE_IN_BACKGROUND = env_bool("BREAK_ADVICE_IN_BACKGROUND", True)
# A fleet config version's analysis (the numbers pass, the placement answer) too,
# within this much memory more than the worker holds (reviewer.fleets.analysis_record).
ANALYSIS_IN_BACKGROUND = env_bool("ANALYSIS_IN_BACKGROUND", True)
ANALYSIS_MEMORY_LIMIT_MB = env_int("ANALYSIS_MEMORY_LIMIT_MB", 1024)
# How much lower the docs worker's CPU priority is (os.nice): re-anchoring is
# background work, so the web process's answers come first on a busy machine.
DOCS_WORKER_NICE = env_int("DOCS_WORKER_NICE", 10)
# The beat process (one per deployment; serve starts it) sends the reaper of
# stalled runs and sweeps; expired sends are dropped rather than piled up.
REAP_EVERY_S = 10.0
CELERY_BEAT_SCHEDULE = {
    "reap-stalled": {"task": "reviewer.reap_stalled", "schedule": REAP_EVERY_S,
                     "options": {"expires": REAP_EVERY_S}},
    "dispatch-runs": {"task": "reviewer.dispatch_runs", "schedule": REAP_EVERY_S,
                      "options": {"expires": REAP_EVERY_S}},
    # Uploaded trace files that no config, version, run or sweep names any more.
    "cleanup-traces": {"task": "reviewer.cleanup_traces", "schedule": 3600.0, "options": {"expires": 3600}},
    # The daily digest of notifications, for users who chose it.
    "notification-digest": {"task": "reviewer.send_notification_digests",
                            "schedule": crontab(hour=env_int("DIGEST_HOUR_UTC", 7), minute=0),
                            "options": {"expires": 3600}},
}

# E-mail: printed to the console unless EMAIL_HOST names an SMTP server.
EMAIL_HOST = env_str("EMAIL_HOST")
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST else "django.core.mail.backends.console.EmailBackend",
)
EMAIL_PORT = env_int("EMAIL_PORT", 587)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", EMAIL_PORT == 587)
EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", EMAIL_PORT == 465)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT_S", 10)
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "design-review@localhost")
# The address links in e-mails start with, e.g. https://review.example.
SITE_URL = env_str("SITE_URL")

REST_FRAMEWORK = {
    # Token first: DRF answers an unauthenticated request with the first
    # class's WWW-Authenticate header, which makes it 401 (session auth has none: 403).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "reviewer.api.pagination.PageNumberPagination",
    # DRF's JSON, form and multipart parsers; JSON bodies within a nesting bound.
    "DEFAULT_PARSER_CLASSES": [
        "reviewer.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "PAGE_SIZE": 50,
    "DEFAULT_SCHEMA_CLASS": "reviewer.api.schema.ReviewAutoSchema",
    # Rates are the API_THROTTLE_* settings below, read per request.
    "DEFAULT_THROTTLE_CLASSES": [
        "reviewer.api.throttles.BurstThrottle",
        "reviewer.api.throttles.SustainedThrottle",
        "reviewer.api.throttles.AnonThrottle",
    ],
    # Service errors and model validation become answers here, in one place.
    "EXCEPTION_HANDLER": "reviewer.api.errors.exception_handler",
}

API_THROTTLE_BURST = env_rate("API_THROTTLE_BURST", "30/s")
API_THROTTLE_SUSTAINED = env_rate("API_THROTTLE_SUSTAINED", "600/min")
API_THROTTLE_ANON = env_rate("API_THROTTLE_ANON", "60/min")

SPECTACULAR_SETTINGS = {
    "TITLE": "Design review dashboard API",
    "DESCRIPTION": "Design docs, fleet configs, review sessions, findings, emulator runs and sweeps.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Request and answer bodies get components of their own: what a client sends
    # (no read-only fields, text rules) differs from what it reads back.
    "COMPONENT_SPLIT_REQUEST": True,
    # Every operation lists its error answers (reviewer.api.schema).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "reviewer.api.schema.add_error_responses",
    ],
    # Choice sets used by several fields get one name in the schema.
    "ENUM_NAME_OVERRIDES": {
        "ReviewPassEnum": "reviewer.models.review.ReviewPass",
        "FindingStatusEnum": "reviewer.models.review.FindingStatus",
        "SessionStatusEnum": "reviewer.models.review.SessionStatus",
        "RunStatusEnum": "reviewer.models.runs.RunStatus",
    },
}

# Limits on emulator work a user can ask for. The request budget's default is the
# emulator's own; the web app passes this setting wherever it validates a scenario
# that will run (saving a fleet config, starting a run), so both accept the same ones.
RUNS_PER_USER = env_int("RUNS_PER_USER", 3)
# Runs the workers play at once; the hand-off gives queued runs to the broker
# only for free slots, fairly between users. 0: the sum the live workers announce.
RUN_SLOTS = env_int("RUN_SLOTS", 0)
RUN_REQUEST_BUDGET = env_int("RUN_REQUEST_BUDGET", DEFAULT_REQUEST_BUDGET)
# Wall time a paced run holds a worker (duration_s / speed), per run, per user
# and for everyone's queued and running runs together; simulated requests too.
RUN_WALL_BUDGET_S = env_int("RUN_WALL_BUDGET_S", 2 * 3600)
# The longest a paced run (speed other than max) may hold its worker: a live view
# of hours would hold the only run worker of a small install for hours.
RUN_PACED_MAX_S = env_int("RUN_PACED_MAX_S", 900)
USER_WALL_BUDGET_S = env_int("USER_WALL_BUDGET_S", 4 * 3600)
GLOBAL_WALL_BUDGET_S = env_int("GLOBAL_WALL_BUDGET_S", 24 * 3600)
USER_REQUEST_BUDGET = env_int("USER_REQUEST_BUDGET", 3 * RUN_REQUEST_BUDGET)
GLOBAL_REQUEST_BUDGET = env_int("GLOBAL_REQUEST_BUDGET", 10 * RUN_REQUEST_BUDGET)
# Per doc: the largest body, the revisions kept and the findings on it (all sessions).
DOC_BODY_MAX_CHARS = env_int("DOC_BODY_MAX_CHARS", 1_000_000)
DOC_REVISIONS_MAX = env_int("DOC_REVISIONS_MAX", 200)
DOC_FINDINGS_MAX = env_int("DOC_FINDINGS_MAX", 2_000)
# The fleet config versions one user's configs hold together (every save of a changed scenario is one).
USER_FLEET_VERSIONS_MAX = env_int("USER_FLEET_VERSIONS_MAX", 2_000)
# The revision diff: characters of each revision compared, the longest stretch with
# no shared sentence searched for matches, findings placed on the two sides.
DIFF_MAX_CHARS = env_int("DIFF_MAX_CHARS", 1_000_000)
DIFF_MAX_SEGMENTS = env_int("DIFF_MAX_SEGMENTS", 4_000)
DIFF_MAX_FINDINGS = env_int("DIFF_MAX_FINDINGS", 500)
# The review document: the most characters its opening, strengths and restatement each hold.
REVIEW_DOCUMENT_MAX_CHARS = env_int("REVIEW_DOCUMENT_MAX_CHARS", 50_000)
# Live commands (faults, cancel) one run takes.
RUN_COMMANDS_MAX = env_int("RUN_COMMANDS_MAX", 50)

# Uploaded files: request traces of fleet configs and measurement CSVs for
# calibration. A request whose declared size is over UPLOAD_MAX_BYTES is refused
# before its body is read. Uploaded traces are kept in TRACE_UPLOAD_DIR and
# scenarios name them by absolute path, so the Celery workers that replay them
# must see that directory at the same path (shared storage on several machines).
UPLOAD_MAX_BYTES = env_int("UPLOAD_MAX_BYTES", 64 * 1024 * 1024)
# The traces stored for one user's fleet configs together (every version's file counts).
USER_TRACE_STORAGE_MAX_BYTES = env_int("USER_TRACE_STORAGE_MAX_BYTES", 1024 * 1024 * 1024)
# Uploads up to this size are checked in the web request; bigger ones by a docs worker
# (the request answers 202 with a status URL the page asks).
TRACE_PARSE_INLINE_MAX_BYTES = env_int("TRACE_PARSE_INLINE_MAX_BYTES", 1024 * 1024)
TRACE_UPLOAD_DIR = Path(env_str("TRACE_UPLOAD_DIR", str(DATA_DIR / "traces"))).resolve()

# /metrics answers staff and scrapers sending Authorization: Bearer METRICS_TOKEN.
METRICS_TOKEN = env_str("METRICS_TOKEN")

# LOG_FORMAT=json writes one JSON object per line (python-json-logger), for a
# log collector; the default is plain text.
LOG_FORMAT = env_str("LOG_FORMAT", "text")
if LOG_FORMAT not in ("text", "json"):
    raise ValueError(f"LOG_FORMAT={LOG_FORMAT!r}: use text or json")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "text": {"format": "%(message)s"},
        "json": {"()": "pythonjsonlogger.json.JsonFormatter",
                 "fmt": "%(asctime)s %(levelname)s %(name)s %(process)d %(message)s",
                 "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"}},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"daphne": {"level": "WARNING"}},
}

# Errors and traces go to Sentry when SENTRY_DSN is set (Django and Celery
# integrations are enabled by sentry-sdk on its own); no personal data is sent.
SENTRY_DSN = env_str("SENTRY_DSN")
if SENTRY_DSN:
    import sentry_sdk

    sentry_sdk.init(
        dsn=SENTRY_DSN,
        environment=env_str("SENTRY_ENVIRONMENT", "production"),
        traces_sample_rate=float(env_str("SENTRY_TRACES_SAMPLE_RATE", "0")),
        send_default_pii=False,
    )
