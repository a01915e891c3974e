"""Signals the engine sends inside its transactions, for apps that runs must not import."""
from django.dispatch import Signal

# Sent inside the transaction that moves a run to a terminal status (kwargs: run, status).
run_finished = Signal()

# Sent inside the transaction that re-queues parked steps without an approval decision
# (run resume); kwargs: run, step_ids, actor.
steps_requeued = Signal()
