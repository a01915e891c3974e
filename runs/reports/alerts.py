"""Run alerts: a graph's owners ask for an email when one of its runs fails or is parked; sent after the change commits.

The subscriptions are rows of accounts (``RunAlertSubscription``); sending them reacts to
the engine's signals, so it lives here, above accounts in the stack.

Who owns a graph (and so may subscribe): staff, builders (they edit every graph), the
user who created it, and its operators (``accounts.policy.can_operate_graph``). The
email goes through Django's email backend (``EMAIL_BACKEND``) once the transaction that
failed or parked the run has committed, so a rolled-back change never mails anyone and a
slow mail server never holds a run's row lock. A subscriber who can no longer read the
run (their role was taken away) or has no email address is skipped.
"""
from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.dispatch import receiver

from accounts.models import RunAlertSubscription
from accounts.policy import can_operate_graph, can_read_run
from accounts.roles import BUILDERS, has_role, is_admin
from runs.models import Run
from runs.signals import run_finished, step_parked

log = logging.getLogger("ballast.alerts")

EVENTS = ("failed", "parked")


def may_subscribe(user: Any, graph: Any) -> bool:
    """Whether ``user`` owns ``graph`` for alerts (see the module docstring)."""
    if not (user is not None and user.is_authenticated and user.is_active):
        return False
    return bool(is_admin(user) or has_role(user, BUILDERS) or graph.created_by_id == user.pk or can_operate_graph(user, graph))


def alert_get(*, user: Any, graph: Any) -> RunAlertSubscription | None:
    """``user``'s subscription to ``graph``'s runs, or None."""
    return RunAlertSubscription.objects.filter(user=user, graph=graph).first()


def alert_set(*, user: Any, graph: Any, on_failed: bool, on_parked: bool) -> RunAlertSubscription | None:
    """Subscribe ``user`` to ``graph`` for the chosen events (both false: unsubscribe,
    returns None). The caller checked :func:`may_subscribe`."""
    if not on_failed and not on_parked:
        RunAlertSubscription.objects.filter(user=user, graph=graph).delete()
        return None
    subscription, _ = RunAlertSubscription.objects.update_or_create(
        user=user, graph=graph, defaults={"on_failed": on_failed, "on_parked": on_parked}
    )
    return subscription


def _run_url(run_id: int) -> str:
    # The run page's route (ballast.urls "run-page"), written out: reversing it would load
    # the whole URLconf, and with it the web stack, into a worker that sends the email.
    return f"{settings.BALLAST_PUBLIC_URL}/runs/{run_id}/"


def alerts_send(*, run_id: int, event: str, detail: str = "") -> int:
    """Email every subscriber of the run's graph who asked for ``event`` ("failed" or
    "parked"), may read the run and has an address. Returns the number of emails sent.
    Each email is sent on its own: one refused address does not stop the others."""
    run = Run.objects.select_related("graph_version__graph").get(pk=run_id)
    graph = run.graph_version.graph
    flag = {"failed": "on_failed", "parked": "on_parked"}[event]
    subscriptions = RunAlertSubscription.objects.filter(graph=graph, **{flag: True}).select_related("user")
    if event == "failed" and isinstance(run.error, dict) and not detail:
        detail = f"Error: {run.error.get('message', run.error.get('code', ''))}"
    what = "failed" if event == "failed" else "is parked: a step was interrupted by a crash and is not safe to repeat; someone must decide"
    subject = f"[Ballast] Run {run.pk} of {graph.name} {'failed' if event == 'failed' else 'needs a decision'}"
    sent = 0
    for subscription in subscriptions:
        user = subscription.user
        if not user.is_active or not user.email or not can_read_run(user, run):
            continue
        body = (
            f"Run {run.pk} of the graph \"{graph.name}\" (version {run.graph_version.number}) {what}.\n"
            + (f"\n{detail}\n" if detail else "")
            + f"\nOpen the run: {_run_url(run.pk)}\n"
            + "\nYou get this email because you asked to be told about this graph's runs; "
            + "turn it off with Alerts on the graph's row of the Graphs page.\n"
        )
        try:
            send_mail(subject, body, None, [user.email])
            sent += 1
        except Exception:  # one failing address must not stop the rest
            log.exception("run alert to %s for run %s could not be sent", user.email, run.pk)
    return sent


@receiver(run_finished, dispatch_uid="ballast_run_alert_failed")
def _alert_on_failed(sender: Any, run: Any, status: str, **kwargs: Any) -> None:
    if status != "failed":
        return
    run_id = run.pk
    transaction.on_commit(lambda: alerts_send(run_id=run_id, event="failed"))


@receiver(step_parked, dispatch_uid="ballast_run_alert_parked")
def _alert_on_parked(sender: Any, run: Any, step: Any, **kwargs: Any) -> None:
    run_id, node = run.pk, step.node_id
    transaction.on_commit(lambda: alerts_send(run_id=run_id, event="parked", detail=f"Parked step: {node} (attempt {step.attempt})."))
