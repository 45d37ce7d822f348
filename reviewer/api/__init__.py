"""The REST API under /api/: one module per area, routes in ``reviewer.api.urls``."""
