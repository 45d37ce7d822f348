"""The app's settings with channels-redis's pub/sub channel layer, for comparing
fan-out to many websocket viewers (bench_stream.py --layer pubsub)."""

from reviewer.settings import *  # noqa: F403
from reviewer.settings import REDIS_URL

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    }
}
