"""Email to the people who may decide an approval request, with a link to it in the inbox (the link only opens a page)."""
from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q

from accounts.roles import APPROVERS
from approvals.models import ApprovalRequest

log = logging.getLogger("ballast.approvals")


def item_url(request: ApprovalRequest) -> str:
    """The inbox page of ``request`` (``BALLAST_PUBLIC_URL`` + ``/approvals/<id>/``).
    Opening it (GET, HEAD, a chat link preview) never decides: only a signed-in POST
    with CSRF from the inbox page does."""
    return f"{settings.BALLAST_PUBLIC_URL.rstrip('/')}/approvals/{request.pk}/"


def recipients(request: ApprovalRequest) -> list[str]:
    """The email addresses of the active users who may decide ``request``: its named
    approvers and the members of its named groups; when it names none, the graph's
    approvers and the ``approvers`` group (the rule of accounts.policy.decider_q, less
    superusers and staff, who see every request but are not asked about each). Sorted,
    without duplicates or empty addresses."""
    User = get_user_model()
    if request.approvers or request.approver_groups:
        who = Q(username__in=request.approvers) | Q(groups__name__in=request.approver_groups)
    else:
        who = Q(groups__name=APPROVERS) | Q(pk__in=request.run.graph_version.graph.approvers.values("pk"))
    emails = User.objects.filter(who, is_active=True).exclude(email="").values_list("email", flat=True).distinct()
    return sorted(set(emails))


def notify(request: ApprovalRequest, *, overdue: bool = False) -> int:
    """Send one email per recipient of ``request``; returns how many were sent. A mail
    server failure is logged, never raised: a run's progress does not hang on email.
    ``overdue``: its deadline passed (the subject says so)."""
    to = recipients(request)
    if not to:
        return 0
    graph = request.run.graph_version.graph.name
    subject = f"[Ballast] {'Overdue' if overdue else 'Approval needed'}: {graph} (run {request.run_id})"
    body = (
        f"Run {request.run_id} of graph '{graph}' waits for a decision at '{request.node_id}'.\n\n"
        f"{request.prompt}\n\n"
        f"Open it in the inbox to approve or reject: {item_url(request)}\n"
        "(Opening the link decides nothing; you decide on the page, signed in.)\n"
    )
    sent = 0
    for address in to:
        try:
            sent += send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [address])
        except Exception:  # noqa: BLE001  (SMTP errors are many; a run must not fail on them)
            log.exception("approval %s: email to %s failed", request.pk, address)
    return sent


def notify_on_commit(request: ApprovalRequest, *, overdue: bool = False) -> None:
    """Email ``request``'s approvers once the transaction that created, reassigned or
    escalated it commits (a rolled-back request sends nothing; a crash between the commit
    and the send loses the email: email is at most once)."""
    pk = request.pk

    def send() -> None:
        fresh: Any = ApprovalRequest.objects.select_related("run__graph_version__graph").filter(pk=pk).first()
        if fresh is not None and fresh.status == "pending":
            notify(fresh, overdue=overdue)

    transaction.on_commit(send)
