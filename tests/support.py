"""Data and helpers shared by test fixtures (scenarios, the database URL for subprocesses)."""

from __future__ import annotations

# The smallest useful scenario: one model, two hosts of two workers, a few
# simulated seconds at a light load. Frames are half a second apart.
TINY_SCENARIO = """
name = "tiny"
duration_s = 6
seed = 7
sample_s = 0.5

[traffic]
qps = 40
shape = "constant"
peak_qps = 40

[models.small]
share = 1.0
worker_units = 2
tokens = 500
tokens_cv = 0.0

[dispatcher]
max_batch_tokens = 5000
close_after_s = 0.2
policy = "pull"
queue_limit = 0
standby = "cold"
failover_s = 1.0

[worker]
batch_s = 0.5
service = "constant"
service_cv = 0.0

[client]
timeout_s = 10
retries = 0
retry_backoff_s = 1.0

[gateway]
instances = 1
rate_limit_qps = 0
keys = 10
shared_counter = true

[[hosts]]
count = 2
units = 10
workers = ["small@0", "small@2"]
"""



def subprocess_database_url() -> str:
    """A DATABASE_URL that opens the test database pytest-django set up.

    Test servers and Celery workers run as subprocesses; they must read and
    write the same database as the test that started them.
    """
    from django.db import connection

    settings = connection.settings_dict
    name = settings["NAME"]
    if settings["ENGINE"] in ("django.db.backends.sqlite3", "reviewer.ops.sqlite_backend"):
        return f"sqlite:///{name}"
    user = settings.get("USER") or ""
    password = settings.get("PASSWORD") or ""
    auth = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or "5432"
    return f"postgres://{auth}{host}:{port}/{name}"
