"""django-q2 task entry points: take ids, call the engine."""
from runs.engine.loop import execute_step


def step_execute(step_id: int) -> None:
    """Claim and run one step (and successors kept in this worker). Safe to deliver twice."""
    execute_step(step_id)
