"""Publishing to websocket groups from synchronous code and from inside an event loop."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from reviewer.realtime import groups as realtime


async def _subscribe(group: str) -> str:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    return channel


async def _receive(channel: str) -> dict:
    return await asyncio.wait_for(get_channel_layer().receive(channel), timeout=5)


def test_it_publishes_from_synchronous_code(redis_url: str) -> None:
    channel = async_to_sync(_subscribe)("run.901")
    realtime.publish_now(realtime.run_group(901), {"type": "run.frame", "i": 3})
    assert async_to_sync(_receive)(channel) == {"type": "run.frame", "i": 3}


def test_it_publishes_from_code_running_inside_an_event_loop(redis_url: str) -> None:
    async def scenario() -> dict:
        channel = await _subscribe("session.902")
        # A synchronous call made on the loop's own thread: it cannot block.
        realtime.publish_now(realtime.session_group(902), {"type": "session.event", "event": "x"})
        return await _receive(channel)

    assert async_to_sync(scenario)() == {"type": "session.event", "event": "x"}


def test_it_logs_instead_of_raising_when_the_layer_is_unreachable(settings, caplog) -> None:
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                    "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]}}
    }
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    try:
        realtime.publish_now("run.903", {"type": "run.frame"})
        assert realtime.publisher.flush(timeout_s=10)
    finally:
        channel_layers.backends.clear()
    assert "could not publish run.frame to run.903" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_it_answers_a_finding_post_at_once_while_redis_stalls(layer_on_stalled_redis: None, caplog) -> None:
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from reviewer.review import services

    owner = get_user_model().objects.create_user("owner")
    doc = services.doc_create(owner=owner, title="Doc", body="The queue is in memory.")
    session = services.session_create(owner=owner, doc=doc, file_directly=True)
    client = APIClient()
    client.force_authenticate(owner)
    answered: list[int] = []
    post = threading.Thread(target=lambda: answered.append(client.post(
        f"/api/sessions/{session.pk}/findings/", {"pass": "trace", "title": "Lost on failover"},
        format="json").status_code), daemon=True)
    post.start()
    post.join(timeout=realtime.PUBLISH_TIMEOUT_S + 3)
    assert answered == [201]  # a hung publish leaves the list empty
    # The event was given up after the timeout, and said so.
    assert realtime.publisher.flush(timeout_s=realtime.PUBLISH_TIMEOUT_S + 5)
    assert "could not publish session.event" in caplog.text
