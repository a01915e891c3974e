"""django-q2 task entry points: take ids, call the engine."""
from runs.engine.api import step_execute as engine_step_execute


def step_execute(step_id: int) -> None:
    """Claim and run one step (and successors kept in this worker). Safe to deliver twice."""
    engine_step_execute(step_id)
