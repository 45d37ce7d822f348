"""Websocket routes (Channels)."""

from django.urls import path

from reviewer.realtime.consumers import RunConsumer, SessionConsumer
from reviewer.realtime.inbox_consumer import InboxConsumer

websocket_urlpatterns: list = [
    path("ws/runs/<int:run_id>/", RunConsumer.as_asgi()),
    path("ws/sessions/<int:session_id>/", SessionConsumer.as_asgi()),
    path("ws/inbox/", InboxConsumer.as_asgi()),
]
