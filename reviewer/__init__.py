"""The review dashboard: Django project and app in one package."""

from reviewer.celery import app as celery_app

__all__ = ["celery_app"]
