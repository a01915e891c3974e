"""Approval reads: the requests a user may decide (their inbox), all requests (admins), one request."""
from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import decidable_by


def approval_list(*, status: str | None = ApprovalStatus.PENDING) -> QuerySet[ApprovalRequest]:
    """Requests (newest first) with the given status (None = every status)."""
    qs = ApprovalRequest.objects.select_related("run__graph_version__graph").order_by("-id")
    return qs.filter(status=status) if status else qs


def approval_list_for_user(*, user: Any, status: str | None = ApprovalStatus.PENDING) -> QuerySet[ApprovalRequest]:
    """Requests with ``status`` that ``user`` may decide, newest first: one query with the
    rule the decision itself checks (``approvals.services.decidable_by``)."""
    return with_may_decide(approval_list(status=status).filter(decidable_by(user)).distinct(), user=user)


def with_may_decide(queryset: QuerySet[ApprovalRequest], *, user: Any) -> QuerySet[ApprovalRequest]:
    """Annotate ``user_may_decide`` (bool) on each request in the same query, so a page
    of requests costs one query, not one per row."""
    decidable = ApprovalRequest.objects.filter(pk=OuterRef("pk")).filter(decidable_by(user))
    return queryset.annotate(user_may_decide=Exists(decidable))


def approval_get(*, approval_id: int) -> ApprovalRequest:
    """One request. Raises ApprovalRequest.DoesNotExist."""
    return ApprovalRequest.objects.select_related("run__graph_version__graph").get(pk=approval_id)
