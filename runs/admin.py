"""Admin for runs, steps, attempts, events, workers and the retention job (read-only: changes go through the services).
Audit entries have theirs in audit.admin."""
from typing import TYPE_CHECKING, Any

from django.contrib import admin
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from runs.engine.api import steps_worker_alive
from runs.models import RetentionJob, Run, RunEvent, Step, StepAttempt, Worker
from runs.selectors import WaitingFor, with_waiting_for

if TYPE_CHECKING:  # django-stubs' helper, installed with the test extras only
    from django_stubs_ext import WithAnnotations


class ReadOnlyAdminMixin:
    """No add, change or delete permission and every field read-only: a run's records
    change only through runs.services and the engine (which keep the audit log, events
    and leases consistent), never through a form. Viewing stays allowed."""

    model: type[Model]  # the admin's (the mixin only reads it)

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:  # obj: inlines pass it
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> list[str]:
        return [f.name for f in self.model._meta.fields]


class StepInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Step
    fields = ("node_id", "iteration", "status", "attempt", "lease_owner", "cost_usd", "started_at", "finished_at")
    extra = 0
    can_delete = False
    show_change_link = True


class WaitingForFilter(admin.SimpleListFilter):
    """Runs waiting at an approval gate apart from runs parked for a decision after a
    crash (both have status ``waiting``; runs.selectors.with_waiting_for tells them apart)."""

    title = "waiting for"
    parameter_name = "waiting_for"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("approval", "an approval (at a gate)"), ("decision", "a decision (parked after a crash)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        return queryset.filter(waiting_for=self.value()) if self.value() in ("approval", "decision") else queryset


@admin.register(Run)
class RunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "id", "graph_version", "status", "waiting_for", "step_count", "input_tokens", "output_tokens", "cost_usd", "created_at", "finished_at",
    )
    list_filter = ("status", WaitingForFilter, "is_test", "graph_version__graph", "created_at")
    search_fields = ("id", "uuid", "graph_version__graph__name", "idempotency_key")
    readonly_fields = [f.name for f in Run._meta.fields]
    inlines = [StepInline]
    date_hierarchy = "created_at"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        return with_waiting_for(super().get_queryset(request))

    @admin.display(description="waiting for", ordering="waiting_for")
    def waiting_for(self, obj: "WithAnnotations[Run, WaitingFor]") -> str:
        return {"approval": "approval", "decision": "decision (parked)"}.get(obj.waiting_for or "", "-")


class StepAttemptInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = StepAttempt
    fields = ("number", "worker", "status", "error", "usage", "cost_usd", "started_at", "finished_at")
    extra = 0
    can_delete = False


@admin.register(Step)
class StepAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("id", "run", "node_id", "kind", "iteration", "status", "attempt", "lease_owner", "lease_expires_at", "worker_alive", "cost_usd")
    list_filter = ("status", "kind")
    search_fields = ("node_id", "idempotency_key", "run__id")
    readonly_fields = [f.name for f in Step._meta.fields]
    inlines = [StepAttemptInline]

    @admin.display(description="worker alive", boolean=True)
    def worker_alive(self, obj: Step) -> bool | None:
        """Worked out when read (runs.engine.store.liveness); empty when the step is not running."""
        return steps_worker_alive([obj])[obj.pk]


@admin.register(RunEvent)
class RunEventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("id", "run", "kind", "step", "created_at")
    list_filter = ("kind",)
    search_fields = ("run__id", "kind")
    readonly_fields = [f.name for f in RunEvent._meta.fields]


@admin.register(Worker)
class WorkerAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("name", "host", "pid", "started_at", "heartbeat_at")
    readonly_fields = ("name", "host", "pid", "started_at", "heartbeat_at")


@admin.register(RetentionJob)
class RetentionJobAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """The retention job's due row (runs.retention_job): when it fires next, who runs it
    now, and what its last firing pruned (``last_report``)."""

    list_display = ("id", "next_due_at", "running_by", "finished_at", "last_worker")
