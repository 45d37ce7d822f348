from django.apps import AppConfig


class ReviewerConfig(AppConfig):
    name = "reviewer"
    verbose_name = "Design review"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register the app's Prometheus figures (read only when /metrics is scraped)."""
        # ready(): the collector reads the models, importable only once the app registry is ready
        from prometheus_client import REGISTRY

        from reviewer.ops.metrics import ReviewerCollector  # reads the models: after the registry

        if not any(isinstance(c, ReviewerCollector) for c in list(REGISTRY._collector_to_names)):
            REGISTRY.register(ReviewerCollector())
