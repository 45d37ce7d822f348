"""Running the app: the process supervisor of ``manage.py serve``, health checks,
Prometheus metrics, upload limits and the SQLite backend."""
