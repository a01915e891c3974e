"""The management API of a graph's schedules (builders): list, create, read, change, delete, pause, resume, Run now, and the tick log."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from accounts.authentication import IsBuilder
from core.api import ApiView, paginated
from triggers import schedules
from triggers.api_support import graph_of, graph_triggers, with_references
from triggers.models import MissedPolicy, OverlapPolicy, Schedule, ScheduleTick

TAG = ["schedules"]


class ScheduleOutput(serializers.Serializer):
    """A schedule, with its next fire times (UTC; [] while paused)."""

    id = serializers.IntegerField()
    graph = serializers.IntegerField(source="graph_id")
    name = serializers.CharField()
    cron = serializers.CharField()
    timezone = serializers.CharField()
    input = serializers.JSONField()
    version = serializers.SerializerMethodField(help_text="The pinned version number, or null for the latest published one.")
    run_as = serializers.CharField(source="run_as.username")
    paused = serializers.BooleanField()
    overlap_policy = serializers.ChoiceField(choices=OverlapPolicy.choices)
    missed_policy = serializers.ChoiceField(choices=MissedPolicy.choices)
    catch_up_window_seconds = serializers.IntegerField()
    next_fire_at = serializers.DateTimeField(allow_null=True)
    next_fire_times = serializers.SerializerMethodField(help_text="The next fire times (UTC), from next_fire_at; [] while paused.")
    last_run = serializers.IntegerField(source="last_run_id", allow_null=True)
    source = serializers.CharField(help_text='What its runs record as their source: "schedule <name>".')  # type: ignore[assignment]
    created_by = serializers.CharField(source="created_by.username", allow_null=True, default=None)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_version(self, obj: Schedule) -> int | None:
        return None if obj.version is None else obj.version.number

    def get_next_fire_times(self, obj: Schedule) -> list[str]:
        return [t.isoformat().replace("+00:00", "Z") for t in schedules.next_fire_times(obj)]


class ScheduleCreateInput(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    cron = serializers.CharField(max_length=200, help_text="Five fields: minute hour day-of-month month day-of-week (e.g. 0 9 * * MON-FRI).")
    timezone = serializers.CharField(max_length=64, default="UTC", help_text="An IANA time zone (Europe/Paris); the cron is read in it.")
    input = serializers.JSONField(default=dict, help_text="The run input each tick passes (checked against the version's input schema).")
    version = serializers.IntegerField(required=False, allow_null=True, default=None, help_text="A version number; null or absent: latest published.")
    run_as = serializers.CharField(required=False, max_length=150, help_text="The username runs act as (an operator of the graph); default: the creator.")
    paused = serializers.BooleanField(default=False)
    overlap_policy = serializers.ChoiceField(choices=OverlapPolicy.choices, default=OverlapPolicy.SKIP)
    missed_policy = serializers.ChoiceField(choices=MissedPolicy.choices, default=MissedPolicy.SKIP)
    catch_up_window_seconds = serializers.IntegerField(default=3600)


class ScheduleUpdateInput(serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False)
    cron = serializers.CharField(max_length=200, required=False)
    timezone = serializers.CharField(max_length=64, required=False)
    input = serializers.JSONField(required=False)
    version = serializers.IntegerField(required=False, allow_null=True)
    run_as = serializers.CharField(required=False, max_length=150)
    overlap_policy = serializers.ChoiceField(choices=OverlapPolicy.choices, required=False)
    missed_policy = serializers.ChoiceField(choices=MissedPolicy.choices, required=False)
    catch_up_window_seconds = serializers.IntegerField(required=False)


class TickOutput(serializers.Serializer):
    """One tick of a schedule (or a Run now, ``manual``)."""

    id = serializers.IntegerField()
    tick_at = serializers.DateTimeField()
    fired_at = serializers.DateTimeField()
    manual = serializers.BooleanField()
    outcome = serializers.CharField()
    run = serializers.IntegerField(source="run_id", allow_null=True)
    missed = serializers.IntegerField(help_text="Ticks before this one that no run was started for (an outage).")
    error = serializers.JSONField(allow_null=True)


class RunNowOutput(serializers.Serializer):
    run = serializers.IntegerField()
    status = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]


def _schedule(graph_id: int, schedule_id: int) -> Schedule:
    return schedules.schedule_get(graph_id=graph_id, schedule_id=schedule_id)


class ScheduleCollectionApi(ApiView):
    """GET: the graph's schedules. POST: create one (an invalid cron or time zone: 400 naming ``cron`` or ``timezone``)."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="schedules_list", responses=ScheduleOutput(many=True))
    def get(self, request: Any, graph_id: int) -> Response:
        return graph_triggers(Schedule, ScheduleOutput, graph_id)

    @extend_schema(tags=TAG, operation_id="schedules_create", request=ScheduleCreateInput, responses={201: ScheduleOutput})
    def post(self, request: Any, graph_id: int) -> Response:
        graph = graph_of(graph_id)
        data = with_references(graph, self.validated(ScheduleCreateInput, request.data))
        schedule = schedules.schedule_create(
            graph=graph, name=data["name"], user=request.user, cron_expression=data["cron"], timezone=data["timezone"], run_input=data["input"],
            version=data["version"], run_as=data.get("run_as"), paused=data["paused"],
            overlap_policy=data["overlap_policy"], missed_policy=data["missed_policy"], catch_up_window_seconds=data["catch_up_window_seconds"],
        )
        return Response(ScheduleOutput(schedule).data, status=status.HTTP_201_CREATED)


class ScheduleDetailApi(ApiView):
    """GET: one schedule with its next fire times. PATCH: change it (validated as at
    creation; a new cron or time zone re-times it). DELETE: delete it (its runs stay)."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="schedules_read", responses=ScheduleOutput)
    def get(self, request: Any, graph_id: int, schedule_id: int) -> Response:
        return Response(ScheduleOutput(_schedule(graph_id, schedule_id)).data)

    @extend_schema(tags=TAG, operation_id="schedules_update", request=ScheduleUpdateInput, responses=ScheduleOutput)
    def patch(self, request: Any, graph_id: int, schedule_id: int) -> Response:
        schedule = _schedule(graph_id, schedule_id)
        data = with_references(schedule.graph, self.validated(ScheduleUpdateInput, request.data))
        schedule = schedules.schedule_update(schedule=schedule, user=request.user, **data)
        return Response(ScheduleOutput(schedule).data)

    @extend_schema(tags=TAG, operation_id="schedules_delete", responses={204: None})
    def delete(self, request: Any, graph_id: int, schedule_id: int) -> Response:
        schedules.schedule_delete(schedule=_schedule(graph_id, schedule_id), user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SchedulePauseApi(ApiView):
    """POST: pause the schedule (no tick fires until it is resumed)."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="schedules_pause", request=None, responses=ScheduleOutput)
    def post(self, request: Any, graph_id: int, schedule_id: int) -> Response:
        return Response(ScheduleOutput(schedules.schedule_pause(schedule=_schedule(graph_id, schedule_id), user=request.user)).data)


class ScheduleResumeApi(ApiView):
    """POST: resume the schedule at its first tick after now (ticks while paused are not run)."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="schedules_resume", request=None, responses=ScheduleOutput)
    def post(self, request: Any, graph_id: int, schedule_id: int) -> Response:
        return Response(ScheduleOutput(schedules.schedule_resume(schedule=_schedule(graph_id, schedule_id), user=request.user)).data)


class ScheduleRunNowApi(ApiView):
    """POST: start a run now with the schedule's input (source ``schedule <name>``); 201 with the run."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="schedules_run_now", request=None, responses={201: RunNowOutput})
    def post(self, request: Any, graph_id: int, schedule_id: int) -> Response:
        run = schedules.schedule_run_now(schedule=_schedule(graph_id, schedule_id), user=request.user)
        return Response({"run": run.pk, "status": run.status, "source": run.source}, status=status.HTTP_201_CREATED)


class ScheduleTickListApi(ApiView):
    """GET: the schedule's ticks (and Run nows), newest first (paginated)."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="schedules_ticks", responses=paginated(TickOutput, "ScheduleTick"))
    def get(self, request: Any, graph_id: int, schedule_id: int) -> Response:
        schedule = _schedule(graph_id, schedule_id)
        return self.paginate(ScheduleTick.objects.filter(schedule=schedule).order_by("-id"), TickOutput)
