"""Trigger routes (mounted at /api/v1/): the webhook delivery endpoint and the management APIs of webhooks, schedules and completion callbacks."""
from django.urls import path

from triggers import apis, callback_apis, schedule_apis

urlpatterns = [
    path("hooks/<str:token>/", apis.hook_receive, name="hook"),
    path("graphs/<int:graph_id>/webhooks/", apis.WebhookCollectionApi.as_view(), name="webhooks"),
    path("graphs/<int:graph_id>/webhooks/<int:webhook_id>/", apis.WebhookDetailApi.as_view(), name="webhook"),
    path("graphs/<int:graph_id>/webhooks/<int:webhook_id>/rotate-secret/", apis.WebhookRotateApi.as_view(), name="webhook-rotate"),
    path("graphs/<int:graph_id>/webhooks/<int:webhook_id>/listen/", apis.WebhookListenApi.as_view(), name="webhook-listen"),
    path("graphs/<int:graph_id>/webhooks/<int:webhook_id>/deliveries/", apis.WebhookDeliveryListApi.as_view(), name="webhook-deliveries"),
    path("graphs/<int:graph_id>/schedules/", schedule_apis.ScheduleCollectionApi.as_view(), name="schedules"),
    path("graphs/<int:graph_id>/schedules/<int:schedule_id>/", schedule_apis.ScheduleDetailApi.as_view(), name="schedule"),
    path("graphs/<int:graph_id>/schedules/<int:schedule_id>/pause/", schedule_apis.SchedulePauseApi.as_view(), name="schedule-pause"),
    path("graphs/<int:graph_id>/schedules/<int:schedule_id>/resume/", schedule_apis.ScheduleResumeApi.as_view(), name="schedule-resume"),
    path("graphs/<int:graph_id>/schedules/<int:schedule_id>/run-now/", schedule_apis.ScheduleRunNowApi.as_view(), name="schedule-run-now"),
    path("graphs/<int:graph_id>/schedules/<int:schedule_id>/ticks/", schedule_apis.ScheduleTickListApi.as_view(), name="schedule-ticks"),
    path("graphs/<int:graph_id>/callbacks/", callback_apis.CallbackCollectionApi.as_view(), name="callbacks"),
    path("graphs/<int:graph_id>/callbacks/<int:callback_id>/", callback_apis.CallbackDetailApi.as_view(), name="callback"),
    path("graphs/<int:graph_id>/callbacks/<int:callback_id>/rotate-secret/", callback_apis.CallbackRotateApi.as_view(), name="callback-rotate"),
    path("graphs/<int:graph_id>/callback-deliveries/", callback_apis.DeliveryListApi.as_view(), name="callback-deliveries"),
    path("graphs/<int:graph_id>/callback-deliveries/<int:delivery_id>/redeliver/", callback_apis.DeliveryRedeliverApi.as_view(), name="callback-redeliver"),
]
