"""Approval test helpers: the version token a decision must carry, as the inbox shows it."""
from __future__ import annotations

from approvals.models import ApprovalRequest
from approvals.preview import version_token


def version_of(approval: ApprovalRequest | int) -> str:
    """The current ``version`` token of ``approval`` (what the API lists and a decision sends back)."""
    pk = approval if isinstance(approval, int) else approval.pk
    return version_token(ApprovalRequest.objects.select_related("run").get(pk=pk))
