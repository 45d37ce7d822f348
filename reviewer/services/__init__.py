"""Workflows shared by views, API endpoints, tasks and consumers (one module per area)."""
