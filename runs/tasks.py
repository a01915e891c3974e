"""django-q2 task entry points: take ids, call the engine."""
from runs.engine.api import step_execute_due


def step_execute(step_id: int) -> None:
    """A doorbell: claim and run the step due longest (``step_id``, the step it was rung
    for, is a hint), and successors kept in this worker. Safe to deliver twice, late or
    out of order (runs.engine.dispatch)."""
    step_execute_due(step_id)
