"""Webhook routes (mounted at /api/v1/): the delivery endpoint and the management API."""
from django.urls import path

from triggers import apis

urlpatterns = [
    path("hooks/<str:token>/", apis.hook_receive, name="hook"),
    path("graphs/<int:graph_id>/webhooks/", apis.WebhookCollectionApi.as_view(), name="webhooks"),
    path("graphs/<int:graph_id>/webhooks/<int:webhook_id>/", apis.WebhookDetailApi.as_view(), name="webhook"),
    path("graphs/<int:graph_id>/webhooks/<int:webhook_id>/rotate-secret/", apis.WebhookRotateApi.as_view(), name="webhook-rotate"),
    path("graphs/<int:graph_id>/webhooks/<int:webhook_id>/listen/", apis.WebhookListenApi.as_view(), name="webhook-listen"),
    path("graphs/<int:graph_id>/webhooks/<int:webhook_id>/deliveries/", apis.WebhookDeliveryListApi.as_view(), name="webhook-deliveries"),
]
