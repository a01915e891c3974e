"""Queue hand-off: the only django_q import. The queue is a doorbell; the database is the truth.

Each queue entry carries one step id. A duplicate or stale delivery finds the step already
claimed or finished and does nothing (see claims.step_claim). In-process mode (run_graph
without a live qcluster, tests) keeps the same hand-off but into a local deque.
"""
from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Iterable, Iterator

_local = threading.local()


def enqueue(step_ids: Iterable[int]) -> None:
    """Hand step ids to the queue. Call only after the commit that created them."""
    ids = list(step_ids)
    if not ids:
        return
    queue = getattr(_local, "queue", None)
    if queue is not None:
        queue.extend(ids)
        return
    from django_q.tasks import async_task

    for step_id in ids:
        async_task("runs.tasks.step_execute", step_id, q_options={"task_name": f"step {step_id}"})


@contextlib.contextmanager
def local_mode() -> Iterator[deque[int]]:
    """Within this block, hand-offs from this thread go to the yielded deque, not django-q2."""
    previous = getattr(_local, "queue", None)
    queue: deque[int] = deque()
    _local.queue = queue
    try:
        yield queue
    finally:
        _local.queue = previous


def in_local_mode() -> bool:
    """Whether this thread is inside :func:`local_mode`."""
    return getattr(_local, "queue", None) is not None
