"""ASGI entry point served by daphne: HTTP through Django, WebSockets through Channels.

WebSockets authenticate with the session cookie (a foreign Origin never carries it) or
an API token (``?token=`` or ``Authorization: Token``); consumers refuse anonymous users.
"""
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ballast.settings")
django_asgi_app = get_asgi_application()

from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path, re_path  # noqa: E402

from accounts.authentication import websocket_auth  # noqa: E402
from approvals.consumers import ApprovalInboxConsumer  # noqa: E402
from runs.live.consumers import RunEventsConsumer  # noqa: E402


class NoSuchSocket(AsyncWebsocketConsumer):
    """Any other WebSocket path (``ws/runs/abc/``): the handshake is refused with close
    code 4404, as for a run the caller may not read; without this route Channels'
    URLRouter raised ValueError and daphne answered 500."""

    channel_layer_alias = None  # no channel of its own (runs.live.consumers.RunEventsConsumer)

    async def connect(self) -> None:
        await self.close(code=4404)


websocket_urlpatterns = [
    path("ws/runs/", RunEventsConsumer.as_asgi()),
    path("ws/runs/<int:run_id>/", RunEventsConsumer.as_asgi()),
    path("ws/approvals/", ApprovalInboxConsumer.as_asgi()),
    re_path(r"", NoSuchSocket.as_asgi()),
]

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": websocket_auth(URLRouter(websocket_urlpatterns)),
    }
)
