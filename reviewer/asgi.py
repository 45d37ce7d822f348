"""ASGI entry point: HTTP through Django, websockets through Channels."""

import os

from django.conf import settings
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "reviewer.settings")
django_asgi_app = get_asgi_application()
if settings.SERVE_STATIC:
    # Daphne serves no files itself; on one machine the app serves its own
    # static files (plotly.js included). Behind a web server, set SERVE_STATIC=0.
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_asgi_app = ASGIStaticFilesHandler(django_asgi_app)

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs the app registry)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from reviewer.ops.uploads import UploadLimitASGI  # noqa: E402
from reviewer.realtime.origin import SameOriginValidator  # noqa: E402
from reviewer.realtime.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # Uploads over the limit are refused before Django reads their bodies.
        "http": UploadLimitASGI(django_asgi_app),
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
