"""Approval test helpers: the version token a decision must carry, as the inbox shows it."""
from __future__ import annotations

from approvals.models import ApprovalRequest
from approvals.preview import version_token
from tests.support.specs import chain, edge, graph, node, transform


def version_of(approval: ApprovalRequest | int) -> str:
    """The current ``version`` token of ``approval`` (what the API lists and a decision sends back)."""
    pk = approval if isinstance(approval, int) else approval.pk
    return version_token(ApprovalRequest.objects.select_related("run").get(pk=pk))


def deadline_spec(escalation: str = "timeout", *, deadline: str | None = "2s", wire_timeout: bool = True, **config) -> dict:
    """start -> review (approval with a deadline) -> send | discard | late -> end."""
    review = {"prompt": "Send it?", "deadline": deadline, "escalation": escalation, **config}
    nodes = [node("start", "start"), node("review", "approval", config=review), transform("send", sent="'yes'"),
             transform("discard", sent="'no'"), transform("late", sent="'late'"), node("end", "end")]
    edges = chain("start", "review") + [edge("review", "send", "approved"), edge("review", "discard", "rejected"),
                                        edge("send", "end"), edge("discard", "end"), edge("late", "end")]
    if wire_timeout:
        edges.append(edge("review", "late", "timeout"))
    else:
        nodes = [n for n in nodes if n["id"] != "late"]
        edges = [e for e in edges if "late" not in (e["source"], e["target"])]
    return graph(nodes, edges)
