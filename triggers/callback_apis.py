"""The API of a graph's completion callbacks: builders manage them (create with the secret shown once, change, rotate, delete); operators read the delivery log and redeliver."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from accounts.authentication import IsBuilder
from core.api import ApiView, paginated
from core.errors import ForbiddenError
from triggers import callback_services as services
from triggers.api_support import graph_of
from triggers.models import CallbackDelivery, CallbackEvent, CompletionCallback, DeliveryStatus

TAG = ["callbacks"]


class CallbackOutput(serializers.Serializer):
    """A completion callback of the graph (its secret is never shown again)."""

    id = serializers.IntegerField()
    graph = serializers.IntegerField(source="graph_id")
    name = serializers.CharField()
    url = serializers.CharField()
    events = serializers.ListField(child=serializers.ChoiceField(choices=CallbackEvent.choices))
    enabled = serializers.BooleanField()
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class CallbackCreatedOutput(CallbackOutput):
    secret = serializers.CharField(help_text="The signing secret (whsec_...), shown this once; rotate it if lost.")


class CallbackCreateInput(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    url = serializers.CharField(max_length=2000, help_text="http(s); refused at save if the outbound guard refuses its address.")
    events = serializers.ListField(child=serializers.CharField(max_length=16), help_text="Any of: succeeded, failed, waiting, parked.")
    enabled = serializers.BooleanField(default=True)


class CallbackUpdateInput(serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False)
    url = serializers.CharField(max_length=2000, required=False)
    events = serializers.ListField(child=serializers.CharField(max_length=16), required=False)
    enabled = serializers.BooleanField(required=False)


class SecretOutput(serializers.Serializer):
    secret = serializers.CharField(help_text="The new signing secret, shown this once.")


class CallbackDeliveryOutput(serializers.Serializer):
    """One event sent (or being sent) to a callback."""

    id = serializers.IntegerField()
    callback = serializers.IntegerField(source="callback_id")
    callback_name = serializers.CharField(source="callback.name")
    run = serializers.IntegerField(source="run_id", allow_null=True)
    event = serializers.ChoiceField(choices=CallbackEvent.choices)
    message_id = serializers.CharField(help_text="The webhook-id header, the same on every attempt.")
    status = serializers.ChoiceField(choices=DeliveryStatus.choices)
    attempts = serializers.IntegerField()
    next_due_at = serializers.DateTimeField(allow_null=True)
    last_status_code = serializers.IntegerField(allow_null=True)
    last_error = serializers.CharField()
    created_at = serializers.DateTimeField()
    last_attempt_at = serializers.DateTimeField(allow_null=True)
    delivered_at = serializers.DateTimeField(allow_null=True)


class DeliveryFilterInput(serializers.Serializer):
    callback = serializers.IntegerField(required=False, min_value=1)
    status = serializers.ChoiceField(choices=DeliveryStatus.choices, required=False)


def _callback(graph_id: int, callback_id: int) -> CompletionCallback:
    return services.callback_get(graph_id=graph_id, callback_id=callback_id)


class CallbackCollectionApi(ApiView):
    """GET: the graph's completion callbacks. POST: create one; 201 with its secret, shown
    this once (a bad or refused URL: 400 naming ``url``)."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="callbacks_list", responses=CallbackOutput(many=True))
    def get(self, request: Any, graph_id: int) -> Response:
        return Response(CallbackOutput(services.callback_list(graph_id=graph_of(graph_id).pk), many=True).data)

    @extend_schema(tags=TAG, operation_id="callbacks_create", request=CallbackCreateInput, responses={201: CallbackCreatedOutput})
    def post(self, request: Any, graph_id: int) -> Response:
        data = self.validated(CallbackCreateInput, request.data)
        created = services.callback_create(graph=graph_of(graph_id), user=request.user, **data)
        return Response({**CallbackOutput(created.callback).data, "secret": created.secret}, status=status.HTTP_201_CREATED)


class CallbackDetailApi(ApiView):
    """GET, PATCH (name, url, events, enabled) and DELETE one callback."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="callbacks_read", responses=CallbackOutput)
    def get(self, request: Any, graph_id: int, callback_id: int) -> Response:
        return Response(CallbackOutput(_callback(graph_id, callback_id)).data)

    @extend_schema(tags=TAG, operation_id="callbacks_update", request=CallbackUpdateInput, responses=CallbackOutput)
    def patch(self, request: Any, graph_id: int, callback_id: int) -> Response:
        data = self.validated(CallbackUpdateInput, request.data)
        callback = services.callback_update(callback=_callback(graph_id, callback_id), user=request.user, **data)
        return Response(CallbackOutput(callback).data)

    @extend_schema(tags=TAG, operation_id="callbacks_delete", responses={204: None})
    def delete(self, request: Any, graph_id: int, callback_id: int) -> Response:
        services.callback_delete(callback=_callback(graph_id, callback_id), user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class CallbackRotateApi(ApiView):
    """POST: a new signing secret, shown this once (the old one signs nothing more)."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="callbacks_rotate_secret", request=None, responses=SecretOutput)
    def post(self, request: Any, graph_id: int, callback_id: int) -> Response:
        return Response({"secret": services.callback_rotate_secret(callback=_callback(graph_id, callback_id), user=request.user)})


def _operable(request: Any, graph_id: int) -> None:
    graph = graph_of(graph_id)
    if not services.may_operate_callbacks(request.user, graph):
        raise ForbiddenError(f"{request.user} may not read callback deliveries of graph {graph_id}",
                             message="Only operators of this graph and builders may see its callback deliveries.")


class DeliveryListApi(ApiView):
    """GET: deliveries of the graph's callbacks and of its runs' own, newest first
    (paginated); ``?status=failed`` lists the undeliverable ones with their last error."""

    @extend_schema(tags=TAG, operation_id="callback_deliveries_list",
                   parameters=[OpenApiParameter("callback", int, required=False), OpenApiParameter("status", str, required=False, enum=DeliveryStatus.values)],
                   responses=paginated(CallbackDeliveryOutput, "CallbackDelivery"))
    def get(self, request: Any, graph_id: int) -> Response:
        _operable(request, graph_id)
        filters = self.validated(DeliveryFilterInput, request.query_params)
        return self.paginate(services.delivery_list(graph_id=graph_id, callback_id=filters.get("callback"), status=filters.get("status")), CallbackDeliveryOutput)


class DeliveryRedeliverApi(ApiView):
    """POST: send a delivered or undeliverable delivery again (same webhook-id and body,
    fresh attempts); 409 while it is still pending."""

    @extend_schema(tags=TAG, operation_id="callback_deliveries_redeliver", request=None, responses=CallbackDeliveryOutput)
    def post(self, request: Any, graph_id: int, delivery_id: int) -> Response:
        _operable(request, graph_id)
        delivery: CallbackDelivery = services.delivery_get(graph_id=graph_id, delivery_id=delivery_id)
        return Response(CallbackDeliveryOutput(services.delivery_redeliver(delivery=delivery, user=request.user)).data)
