"""The webhook delivery endpoint (no session, no CSRF: the URL token and the signature
are the credentials) and the management API of a graph's webhooks (builders)."""
from __future__ import annotations

import math
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from accounts.authentication import IsBuilder
from accounts.throttling import client_address
from core.api import ApiView, paginated
from runs.api.serializer_fields import EngineErrorField, JSONObjectField
from triggers import services
from triggers.api_support import graph_of, graph_triggers, with_references
from triggers.models import WebhookDelivery, WebhookTrigger

TAG = ["webhooks"]


@csrf_exempt
@require_POST
def hook_receive(request: HttpRequest, token: str) -> JsonResponse:
    """POST /api/v1/hooks/<token>/: one delivery (triggers.services.delivery_receive).
    ``?wait=<seconds>`` (at most 30) waits for the run's end."""
    wait: float | None = None
    raw_wait = request.GET.get("wait")
    if raw_wait is not None:
        try:
            wait = float(raw_wait)
        except ValueError:
            wait = math.nan
        if not 0 <= wait <= services.MAX_WAIT_SECONDS:  # NaN fails too
            error = {"code": "invalid", "message": f"wait must be 0 to {services.MAX_WAIT_SECONDS:g} seconds.", "fields": {"wait": ["Out of range."]}}
            return JsonResponse({"error": error}, status=400)
    answer = services.delivery_receive(token=token, body=request.body, headers=request.headers, wait=wait, address=client_address(request))
    response = JsonResponse(answer.body, status=answer.status)
    for name, value in answer.headers.items():
        response[name] = value
    return response


class MappingField(serializers.DictField):
    """Input field -> JSON pointer into the body ("/a/b", "" for all of it) or "header:Name"."""

    child = serializers.CharField(allow_blank=True, max_length=500)


class WebhookOutput(serializers.Serializer):
    """A webhook trigger (never its token or secret)."""

    id = serializers.IntegerField()
    graph = serializers.IntegerField(source="graph_id")
    name = serializers.CharField()
    enabled = serializers.BooleanField()
    version = serializers.SerializerMethodField(help_text="The pinned version number, or null for the latest published one.")
    signed = serializers.SerializerMethodField(help_text="Whether deliveries must be signed (the trigger has a secret).")
    timestamp_window_seconds = serializers.IntegerField()
    input_mapping = serializers.DictField(child=serializers.CharField(allow_blank=True), help_text="Input field -> JSON pointer into the body or header:Name.")
    run_as = serializers.CharField(source="run_as.username")
    listening_until = serializers.DateTimeField(allow_null=True, help_text="While a listen for a test event is open: when it ends (else null).")
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_version(self, obj: WebhookTrigger) -> int | None:
        return None if obj.version is None else obj.version.number

    def get_signed(self, obj: WebhookTrigger) -> bool:
        return bool(obj.secret_encrypted)


class WebhookCreatedOutput(WebhookOutput):
    """A new trigger with its URL and secret, shown this once."""

    url = serializers.CharField()
    secret = serializers.CharField(allow_null=True)


class WebhookCreateInput(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    run_as = serializers.CharField(required=False, max_length=150, help_text="The username runs act as (an operator of the graph); default: the creator.")
    enabled = serializers.BooleanField(default=True)
    version = serializers.IntegerField(required=False, allow_null=True, default=None, help_text="A version number; null or absent: latest published.")
    signed = serializers.BooleanField(default=True)
    timestamp_window_seconds = serializers.IntegerField(default=services.DEFAULT_WINDOW_SECONDS)
    input_mapping = MappingField(required=False, default=dict)


class WebhookUpdateInput(serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False)
    run_as = serializers.CharField(required=False, max_length=150)
    enabled = serializers.BooleanField(required=False)
    version = serializers.IntegerField(required=False, allow_null=True)
    timestamp_window_seconds = serializers.IntegerField(required=False)
    input_mapping = MappingField(required=False)


class DeliveryOutput(serializers.Serializer):
    """One delivery of a trigger."""

    id = serializers.IntegerField()
    delivery_id = serializers.CharField()
    received_at = serializers.DateTimeField()
    status_code = serializers.IntegerField()
    run = serializers.IntegerField(source="run_id", allow_null=True)
    replayed = serializers.BooleanField()
    error = EngineErrorField(allow_null=True, help_text="Why the delivery was refused ({code, message}); null when it started a run.")
    payload = JSONObjectField(allow_null=True, help_text="The run input (after the mapping) of a delivery a listen captured; null for the others.")


class ListenInput(serializers.Serializer):
    seconds = serializers.IntegerField(default=services.DEFAULT_LISTEN_SECONDS, help_text=f"How long to listen, 1 to {services.MAX_LISTEN_SECONDS}.")


class ListenStateInput(serializers.Serializer):
    after = serializers.IntegerField(min_value=0, help_text="The ``after`` the listen answered with.")


class ListenOutput(serializers.Serializer):
    """A listen for a test event: open until ``listening_until`` (null once it ended or
    captured), and the delivery it captured, if any."""

    listening_until = serializers.DateTimeField(allow_null=True)
    listening = serializers.BooleanField()
    after = serializers.IntegerField(help_text="Poll GET .../listen/?after=<this>.")
    delivery = DeliveryOutput(allow_null=True)


def _url(request: Any, token: str) -> str:
    return str(request.build_absolute_uri(f"/api/v1/hooks/{token}/"))


class WebhookCollectionApi(ApiView):
    """GET: the graph's webhooks. POST: create one (201 with ``url`` and ``secret``, shown this once)."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="webhooks_list", responses=WebhookOutput(many=True))
    def get(self, request: Any, graph_id: int) -> Response:
        return graph_triggers(WebhookTrigger, WebhookOutput, graph_id)

    @extend_schema(tags=TAG, operation_id="webhooks_create", request=WebhookCreateInput, responses={201: WebhookCreatedOutput})
    def post(self, request: Any, graph_id: int) -> Response:
        graph = graph_of(graph_id)
        data = with_references(graph, self.validated(WebhookCreateInput, request.data))
        created = services.trigger_create(
            graph=graph, name=data["name"], user=request.user, version=data["version"],
            input_mapping=data["input_mapping"], signed=data["signed"], enabled=data["enabled"],
            timestamp_window_seconds=data["timestamp_window_seconds"], run_as=data.get("run_as"),
        )
        body = {**WebhookOutput(created.trigger).data, "url": _url(request, created.token), "secret": created.secret}
        return Response(body, status=status.HTTP_201_CREATED)


class WebhookDetailApi(ApiView):
    """GET: one webhook. PATCH: change name, enabled, version (null: latest published),
    window, input mapping (validated against the version's input schema). DELETE: delete it."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="webhooks_read", responses=WebhookOutput)
    def get(self, request: Any, graph_id: int, webhook_id: int) -> Response:
        return Response(WebhookOutput(services.trigger_get(graph_id=graph_id, trigger_id=webhook_id)).data)

    @extend_schema(tags=TAG, operation_id="webhooks_update", request=WebhookUpdateInput, responses=WebhookOutput)
    def patch(self, request: Any, graph_id: int, webhook_id: int) -> Response:
        trigger = services.trigger_get(graph_id=graph_id, trigger_id=webhook_id)
        data = with_references(trigger.graph, self.validated(WebhookUpdateInput, request.data))
        trigger = services.trigger_update(trigger=trigger, user=request.user, **data)
        return Response(WebhookOutput(trigger).data)

    @extend_schema(tags=TAG, operation_id="webhooks_delete", responses={204: None})
    def delete(self, request: Any, graph_id: int, webhook_id: int) -> Response:
        services.trigger_delete(trigger=services.trigger_get(graph_id=graph_id, trigger_id=webhook_id), user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookRotateApi(ApiView):
    """POST: a new secret (the old one stops verifying at once), answered this once."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="webhooks_rotate_secret", request=None, responses=WebhookCreatedOutput)
    def post(self, request: Any, graph_id: int, webhook_id: int) -> Response:
        trigger = services.trigger_get(graph_id=graph_id, trigger_id=webhook_id)
        secret = services.trigger_rotate_secret(trigger=trigger, user=request.user)
        return Response({**WebhookOutput(trigger).data, "secret": secret})


class WebhookDeliveryListApi(ApiView):
    """GET: the webhook's deliveries, newest first (paginated)."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="webhooks_deliveries", responses=paginated(DeliveryOutput, "WebhookDelivery"))
    def get(self, request: Any, graph_id: int, webhook_id: int) -> Response:
        trigger = services.trigger_get(graph_id=graph_id, trigger_id=webhook_id)
        return self.paginate(WebhookDelivery.objects.filter(trigger=trigger).order_by("-id"), DeliveryOutput)


class WebhookListenApi(ApiView):
    """POST ``{"seconds"}``: listen for the next delivery (default 120 s, at most 600);
    answers ``after`` to poll with. GET ``?after=<id>``: is it still listening, and the
    delivery it captured (with its ``payload``), if any. DELETE: stop listening (204)."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="webhooks_listen", request=ListenInput, responses=ListenOutput)
    def post(self, request: Any, graph_id: int, webhook_id: int) -> Response:
        trigger = services.trigger_get(graph_id=graph_id, trigger_id=webhook_id)
        data = self.validated(ListenInput, request.data if request.data else {})
        trigger, after = services.trigger_listen(trigger=trigger, user=request.user, seconds=data["seconds"])
        return Response(ListenOutput({"listening_until": trigger.listening_until, "listening": True, "after": after, "delivery": None}).data)

    @extend_schema(tags=TAG, operation_id="webhooks_listen_state", parameters=[ListenStateInput], responses=ListenOutput)
    def get(self, request: Any, graph_id: int, webhook_id: int) -> Response:
        trigger = services.trigger_get(graph_id=graph_id, trigger_id=webhook_id)
        after = self.validated(ListenStateInput, request.query_params)["after"]
        delivery = services.trigger_listen_result(trigger=trigger, after=after)
        listening = delivery is None and services.trigger_is_listening(trigger)
        until = trigger.listening_until if listening else None
        return Response(ListenOutput({"listening_until": until, "listening": listening, "after": after, "delivery": delivery}).data)

    @extend_schema(tags=TAG, operation_id="webhooks_listen_stop", request=None, responses={204: None})
    def delete(self, request: Any, graph_id: int, webhook_id: int) -> Response:
        services.trigger_listen_stop(trigger=services.trigger_get(graph_id=graph_id, trigger_id=webhook_id), user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
