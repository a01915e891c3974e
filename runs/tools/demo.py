"""Offline demo tools for the bundled examples: a tiny knowledge base, an order store
with replication lag, and a refund ledger keyed by idempotency key."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from django.conf import settings
from pydantic import BaseModel, Field

from runs.tools import ToolContext, tool

KNOWLEDGE_BASE = [
    {"id": "kb-1", "title": "Resetting your password", "keywords": ["password", "login", "reset", "locked"],
     "answer": "Use 'Forgot password' on the sign-in page; the link is valid for 30 minutes."},
    {"id": "kb-2", "title": "Refund policy", "keywords": ["refund", "money back", "return", "charge"],
     "answer": "Orders can be refunded within 30 days of delivery; refunds reach the card in 5-10 days."},
    {"id": "kb-3", "title": "Shipping times", "keywords": ["shipping", "delivery", "late", "track"],
     "answer": "Standard shipping takes 3-5 business days; tracking links are in the order email."},
    {"id": "kb-4", "title": "Service status", "keywords": ["down", "outage", "error", "500", "crash"],
     "answer": "Live service status is at status.example.com; incidents are updated every 30 minutes."},
]

# Orders marked lagging appear only from the given lookup attempt on (a replica that is
# behind), which is what the refund example's bounded retry loop is for.
ORDERS: dict[str, dict[str, Any]] = {
    "A-1001": {"amount": 49.0, "currency": "USD", "customer": "ada@example.com", "delivered_days_ago": 4},
    "A-1002": {"amount": 129.5, "currency": "USD", "customer": "grace@example.com", "delivered_days_ago": 12, "visible_from_attempt": 2},
    "A-1003": {"amount": 15.0, "currency": "EUR", "customer": "linus@example.com", "delivered_days_ago": 45},
}


class SearchArgs(BaseModel):
    query: str = Field(max_length=2000)
    limit: int = Field(2, ge=1, le=10)


@tool("kb_search", description="Search the demo help-centre articles by keyword.")
def kb_search(args: SearchArgs, ctx: ToolContext) -> list[dict]:
    """Articles whose keywords occur in ``query`` (case-insensitive), best first."""
    text = args.query.lower()
    scored = [(sum(k in text for k in a["keywords"]), a) for a in KNOWLEDGE_BASE]
    hits = [a for score, a in sorted(scored, key=lambda s: -s[0]) if score > 0]
    return [{"id": a["id"], "title": a["title"], "answer": a["answer"]} for a in hits[: args.limit]]


class LookupArgs(BaseModel):
    order_id: str = Field(max_length=64)
    attempt: int = Field(1, ge=1, description="which lookup this is (1 = first)")


@tool("order_lookup", description="Look an order up in the demo order store (a lagging replica).")
def order_lookup(args: LookupArgs, ctx: ToolContext) -> dict:
    """``{"found": bool, "order_id", ...order fields}``; lagging orders appear late."""
    order = ORDERS.get(args.order_id)
    if order is None or args.attempt < order.get("visible_from_attempt", 1):
        return {"found": False, "order_id": args.order_id}
    fields = {k: v for k, v in order.items() if k != "visible_from_attempt"}
    return {"found": True, "order_id": args.order_id, **fields}


class RefundArgs(BaseModel):
    order_id: str = Field(max_length=64)
    amount: float = Field(gt=0, le=100000)
    currency: str = Field("USD", min_length=3, max_length=3)


@tool("issue_refund", description="Issue a refund in the demo payment ledger (not safe to repeat).", repeat_safe=False)
def issue_refund(args: RefundArgs, ctx: ToolContext) -> dict:
    """Append the refund to the demo ledger (var/demo-refunds.jsonl) unless a refund
    with this step's idempotency key is there already, as a payment API would; returns
    ``{"refund_id", "status": "issued"|"duplicate"}``."""
    ledger = Path(settings.VAR_DIR) / "demo-refunds.jsonl"
    refund_id = "rf_" + hashlib.sha256(ctx.idempotency_key.encode()).hexdigest()[:16]
    if ledger.exists():
        for line in ledger.read_text().splitlines():
            if line and json.loads(line)["refund_id"] == refund_id:
                return {"refund_id": refund_id, "status": "duplicate"}
    with ledger.open("a") as fh:
        fh.write(json.dumps({"refund_id": refund_id, "order_id": args.order_id, "amount": args.amount, "currency": args.currency}) + "\n")
    return {"refund_id": refund_id, "status": "issued"}
