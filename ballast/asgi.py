"""ASGI entry point served by daphne: HTTP through Django, WebSockets through Channels.

WebSockets authenticate with the session cookie (a foreign Origin never carries it) or
an API token (``?token=`` or ``Authorization: Token``); consumers refuse anonymous users.
"""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ballast.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from accounts.authentication import websocket_auth  # noqa: E402
from approvals.consumers import ApprovalInboxConsumer  # noqa: E402
from runs.consumers import RunEventsConsumer  # noqa: E402

websocket_urlpatterns = [
    path("ws/runs/", RunEventsConsumer.as_asgi()),
    path("ws/runs/<int:run_id>/", RunEventsConsumer.as_asgi()),
    path("ws/approvals/", ApprovalInboxConsumer.as_asgi()),
]

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": websocket_auth(URLRouter(websocket_urlpatterns)),
    }
)
