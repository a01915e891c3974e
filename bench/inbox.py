"""The approvals inbox with 10,000 waiting requests: server time per page of each list, its counts, a search, one item, and the live socket's reads.

``python -m bench inbox [--db sqlite|postgres] [--n N] [--runs R]``. The load: ``n``
(default 10,000) runs waiting at an approval gate, cloned row for row from one real run
(bench.cases._clone_waiting_runs); one approver in the ``approvers`` group has 1,000 of
them (a tenth) assigned to them by name (the rest wait for the group) and has decided 100 more for
real (approval_decide: those runs resumed; their successors are left queued). Every page is
``GET`` through Django's test client in this process (middleware, session auth, DRF, the
serializer with its next-action preview), the same first page of 50 the inbox shows, and
its body is checked. The live socket (approvals.consumers) is measured as the work it does
in its database thread: the shared marker read every poll, a socket's read of its own
inbox when the marker moved with nothing new for it, and a (re)connect's snapshot.
"""
from __future__ import annotations

import json
import time
from typing import Any

from bench import graphs
from bench.cases import _clone_waiting_runs, start_inprocess
from bench.core import Reporter, check, reset_tables

DECIDED = 100
PAGE = 50


def _timed(page: Any, reps: int) -> tuple[list[float], int]:
    """(ms per call over ``reps`` calls after one warm-up, statements of the warm-up)."""
    from django.db import connection

    queries: list[str] = []

    def counter(execute, sql, params, many, context):
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(counter):
        page()
    samples = []
    for _ in range(reps):
        t = time.perf_counter()
        page()
        samples.append((time.perf_counter() - t) * 1000)
    return samples, len(queries)


def case_inbox(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    """See the module docstring. Figures ``inbox.<what>`` in ms per page (or per read)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import connection
    from django.test import Client

    from approvals.consumers import ApprovalInboxConsumer, inbox_marker
    from approvals.models import ApprovalRequest, principals_text
    from approvals.services import approval_decide
    from runs.engine import api as engine
    from runs.models import Run

    count = n or 10_000
    ASSIGNED = count // 10  # noqa: N806  (1,000 of the default 10,000)
    version = graphs.publish(graphs.gate())
    reset_tables()
    template, _ = start_inprocess(version, {"name": "Ada"})
    check(Run.objects.get(pk=template).status == "waiting", "the template run is not waiting at its gate")
    _clone_waiting_runs(template, count + DECIDED - 1)

    User = get_user_model()
    User.objects.filter(username="bench-inbox").delete()
    me = User.objects.create_user("bench-inbox", "inbox@localhost", None)
    me.groups.add(Group.objects.get_or_create(name="approvers")[0])
    ids = list(ApprovalRequest.objects.order_by("id").values_list("id", flat=True))
    with engine.local_mode():  # the decided runs' successors stay queued here: nothing drives them
        for pk in ids[:DECIDED]:
            approval_decide(approval_id=pk, decision="approve", user=me, comment="bench")
    assigned = ids[DECIDED : DECIDED + ASSIGNED]
    ApprovalRequest.objects.filter(pk__in=assigned).update(approvers=[me.username], principals=principals_text([me.username], []))
    if connection.vendor == "postgresql":
        with connection.cursor() as cur:
            cur.execute("ANALYZE")  # as autovacuum would soon: plans for these rows, not for empty tables
    check(ApprovalRequest.objects.filter(status="pending").count() == count, "not every clone is pending")

    client = Client()
    client.force_login(me)
    some_run = ApprovalRequest.objects.filter(pk=assigned[len(assigned) // 2]).values_list("run_id", flat=True).get()

    def get(url: str, params: dict[str, Any], expect: Any) -> Any:
        def page() -> None:
            response = client.get(url, params, HTTP_HOST="127.0.0.1")
            check(response.status_code == 200, f"GET {url} {params}: {response.status_code} {response.content[:200]!r}")
            body = response.json()
            check(expect(body), f"GET {url} {params}: unexpected body {str(body)[:300]}")

        return page

    def listed(total: int, rows: int = PAGE) -> Any:
        return lambda body: body["count"] == total and len(body["results"]) == rows

    inbox = "/api/v1/approvals/inbox/"
    pages: list[tuple[str, str, Any]] = [
        ("group", f"list=group: {count - ASSIGNED:,} waiting for the approvers group", get(inbox, {"list": "group", "page_size": PAGE}, listed(count - ASSIGNED))),
        ("assigned", f"list=assigned: {ASSIGNED:,} naming the user", get(inbox, {"list": "assigned", "page_size": PAGE}, listed(ASSIGNED))),
        ("decided", f"list=decided: {DECIDED} the user approved", get(inbox, {"list": "decided", "page_size": PAGE}, listed(DECIDED))),
        ("counts", "GET inbox/counts/ (the three tabs and the top bar)",
         get(inbox + "counts/", {}, lambda b: (b["assigned"], b["group"], b["decided"]) == (ASSIGNED, count - ASSIGNED, DECIDED))),
        ("search.word", "list=group&q=Ada (every request matches: the worst case)", get(inbox, {"list": "group", "q": "Ada", "page_size": PAGE}, listed(count - ASSIGNED))),
        ("search.run_id", "list=assigned&q=<a run id>", get(inbox, {"list": "assigned", "q": str(some_run), "page_size": PAGE}, listed(1, 1))),
        ("item", "GET approvals/<id>/ (the open item: state, next action, cost)", get(f"/api/v1/approvals/{assigned[0]}/", {}, lambda b: b["id"] == assigned[0])),
    ]
    for name, what, page in pages:
        samples, queries = _timed(page, runs * 2)
        rep.emit(f"inbox.{name}", n=count, runs=len(samples), samples=samples, unit="ms/page", queries=queries,
                 note=f"{what}; first page of {PAGE} with its count, test client in process")

    # The live socket's reads (approvals.consumers), without the socket: the same functions.
    consumer = ApprovalInboxConsumer()
    consumer.user = me
    poll = ApprovalInboxConsumer.__dict__["_poll"].func  # the sync body database_sync_to_async wraps

    def snapshot() -> None:
        consumer.inbox = {}
        arrived, _, _, _ = poll(consumer)
        check(len(arrived) >= 1, "the snapshot is empty")

    def quiet() -> None:
        arrived, changed, left, _ = poll(consumer)
        check(not (arrived or changed or left), "a quiet read found changes")

    consumer.inbox = {}
    first, _, _, _ = poll(consumer)
    shape = {"snapshot_rows": len(first), "snapshot_bytes": len(json.dumps(first, default=str))}
    for name, what, fn in [
        ("ws.marker", "the shared marker read (one per web process every 0.2 s, whatever the sockets)", inbox_marker),
        ("ws.quiet", "one socket's read of its inbox after the marker moved, nothing new for it", quiet),
        ("ws.snapshot", "one socket's snapshot on (re)connect", snapshot),
    ]:
        samples, queries = _timed(fn, runs * 2)
        rep.emit(f"inbox.{name}", n=count, runs=len(samples), samples=samples, unit="ms", queries=queries, note=what, **(shape if name == "ws.snapshot" else {}))

