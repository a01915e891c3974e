"""Approval reads: the requests a user may decide (their inbox lists and counts), all requests (admins), one request."""
from __future__ import annotations

from typing import Any

from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery

from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.services import decidable_by
from runs.models import RunEventCounter


def approval_list(*, status: str | None = ApprovalStatus.PENDING) -> QuerySet[ApprovalRequest]:
    """Requests (newest first) with the given status (None = every status), each with
    ``run_event_seq`` (its run's last event seq, in the same query: where a live client
    follows the run from)."""
    last_seq = RunEventCounter.objects.filter(run_id=OuterRef("run_id")).values("last")[:1]
    qs = (
        ApprovalRequest.objects.select_related("run__graph_version__graph", "run__created_by")
        .prefetch_related("votes")
        .annotate(run_event_seq=Subquery(last_seq))
        .order_by("-id")
    )
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


INBOX_LISTS = ("assigned", "group", "decided")


def _assigned_q(user: Any) -> Q:
    return Q(claimed_by=user) | Q(principals__contains=f"|user:{user.get_username()}|")


def inbox_list(*, user: Any, which: str, search: str = "") -> QuerySet[ApprovalRequest]:
    """One of the inbox's lists for ``user``, newest first:

    - ``assigned``: pending requests they claimed or that name them;
    - ``group``: other pending requests they may decide (through a group, the approvers
      role, the graph's approvers, or as an operator for a parked step), claimed by
      someone else or by no one;
    - ``decided``: requests they decided or voted on, any status.

    ``search``: words matched (each, case-insensitively) against the prompt, the node id
    and the graph's name; a number also matches the run id and the request id. Raises
    ValueError for an unknown ``which``."""
    if which not in INBOX_LISTS:
        raise ValueError(f"which must be one of {INBOX_LISTS}")
    if which == "decided":
        mine = ApprovalRequest.objects.filter(Q(decided_by=user) | Q(votes__user=user)).values("pk")
        qs = approval_list(status=None).filter(pk__in=mine)
    else:
        qs = approval_list().filter(decidable_by(user))
        qs = qs.filter(_assigned_q(user)) if which == "assigned" else qs.exclude(_assigned_q(user))
    for word in search.split()[:8]:
        match = Q(prompt__icontains=word) | Q(node_id__icontains=word) | Q(run__graph_version__graph__name__icontains=word)
        if word.isdigit():
            match |= Q(run_id=int(word)) | Q(pk=int(word))
        qs = qs.filter(match)
    return with_may_decide(qs, user=user)


def inbox_counts(*, user: Any, search: str = "") -> dict[str, int]:
    """``{"assigned", "group", "decided", "waiting"}``: the size of each list, and how many
    wait for ``user`` (assigned, plus group requests nobody has claimed): the top bar's count."""
    counts = {which: inbox_list(user=user, which=which, search=search).count() for which in INBOX_LISTS}
    counts["waiting"] = counts["assigned"] + inbox_list(user=user, which="group", search=search).filter(claimed_by__isnull=True).count()
    return counts


def approval_pending_of_run(*, run_id: int, user: Any) -> QuerySet[ApprovalRequest]:
    """The pending requests of run ``run_id`` (oldest first: the order its steps began to
    wait), each annotated ``user_may_decide`` for ``user``. Reading them is for whoever may
    read the run (the caller checks that): deciding is checked by the decision itself."""
    return with_may_decide(ApprovalRequest.objects.filter(run_id=run_id, status=ApprovalStatus.PENDING).order_by("id"), user=user)


def approval_get(*, approval_id: int) -> ApprovalRequest:
    """One request. Raises ApprovalRequest.DoesNotExist."""
    return ApprovalRequest.objects.select_related("run__graph_version__graph", "run__created_by").prefetch_related("votes").get(pk=approval_id)
