"""Signals the engine sends inside its transactions, for apps that runs must not import."""
from django.dispatch import Signal

# Sent inside the transaction that moves a run to a terminal status (kwargs: run, status).
run_finished = Signal()

# Sent inside the transaction that re-queues parked steps without an approval decision
# (run resume); kwargs: run, step_ids, actor.
steps_requeued = Signal()

# Sent inside the transaction in which recovery parks a step (its worker died and it is
# not safe to repeat: a person decides); kwargs: run, step. Receivers that reach outside
# the database (email) defer to transaction.on_commit.
step_parked = Signal()
