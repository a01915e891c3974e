"""Who may read and act on a run: the one access policy every read path and operator action uses.

Reading a run (its state, steps, events, approvals, cost and its WebSocket stream)
follows the roles that act on it. A user may read a run when they are:

- an admin (staff or superuser): every run;
- a builder (group ``builders``): builders edit every graph, so they read every run;
- an operator of its graph: the graph's named ``operators`` and members of its
  ``operator_groups``; when the graph names neither, members of the ``operators`` group;
- someone who may decide one of its approvals (any status: who decided keeps reading),
  by the rule :func:`decider_q` states (the inbox and the decision use the same rule);
- the user who started it.

Acting on a run (cancel, resume, retry, fork) and starting a run of a graph needs to be
an operator of its graph (superusers always are); deciding an approval follows
:func:`decider_q`. A run the user may not read answers 404 (its existence is not
revealed); an action the user may not take on a run they can read answers 403. Both are
audited by :func:`audit_denied` (action ``access.denied``) in the user's own chain
(``user:<id>``), so a refused read never locks the run's row or lengthens its chain.

Everything here is a filter (``Q``) first, so lists, counts and cost aggregates are one
query with the same rule as the single-object checks; the list endpoints apply it in
their selectors, beneath pagination and throttling.
"""
from __future__ import annotations

from typing import Any

from django.apps import apps
from django.db.models import Exists, OuterRef, Q

from accounts.roles import APPROVERS, BUILDERS, OPERATORS, has_role, is_admin
from audit.chain import audit_in
from core.errors import ForbiddenError, NotFoundError

NOTHING = Q(pk__in=[])

# Actions on a run an operator of its graph may take.
RUN_ACTIONS = ("cancel", "resume", "retry", "fork")


def _active(user: Any) -> bool:
    return user is not None and bool(user.is_authenticated) and bool(user.is_active)


def _group_names(user: Any) -> set[str]:
    names = getattr(user, "_ballast_groups", None)
    if names is None:
        names = set(user.groups.values_list("name", flat=True))
        user._ballast_groups = names
    return names


def operates_q(user: Any, *, graph_ref: str = "pk") -> Q:
    """A filter true where ``user`` may operate the graph whose id is at ``graph_ref``
    (a field path of the filtered model: ``pk`` on Graph, ``graph_version__graph_id`` on
    Run). Named operators (users, groups) when the graph names any, else the
    ``operators`` group; superusers always. Subqueries, not joins: no duplicate rows."""
    if not _active(user):
        return NOTHING
    if user.is_superuser:
        return Q()
    Graph = apps.get_model("graphs", "Graph")
    users = Graph.operators.through.objects.filter(graph_id=OuterRef(graph_ref))
    groups = Graph.operator_groups.through.objects.filter(graph_id=OuterRef(graph_ref))
    names = _group_names(user)
    q = Q(Exists(users.filter(user_id=user.pk)))
    if names:
        q |= Q(Exists(groups.filter(group__name__in=sorted(names))))
    if OPERATORS in names:
        q |= ~Q(Exists(users)) & ~Q(Exists(groups))
    return q


def decider_q(user: Any, *, prefix: str = "") -> Q:
    """Who may decide an approval request, as a filter on ApprovalRequest (``prefix`` ""),
    or on a model reaching it through ``prefix`` (e.g. ``approvals__``). Superusers
    always; else named approvers or members of named groups; when the request names
    none, the graph's approvers, members of the ``approvers`` group and staff. A recovery
    request (a parked step: retry, skip or fail) is also for the operators of the run's
    graph (:func:`operates_q`), who act on its runs anyway."""
    if not _active(user):
        return NOTHING
    if user.is_superuser:
        return Q()
    names = sorted(_group_names(user))
    named = Q(**{f"{prefix}principals__contains": f"|user:{user.get_username()}|"})
    for group in names:
        named |= Q(**{f"{prefix}principals__contains": f"|group:{group}|"})
    default = Q(**{f"{prefix}run__graph_version__graph__approvers": user})
    if APPROVERS in names or user.is_staff:
        default = Q()
    operators = Q(**{f"{prefix}purpose": "recovery"}) & operates_q(user, graph_ref=f"{prefix}run__graph_version__graph_id")
    return named | (Q(**{f"{prefix}principals": ""}) & default) | operators


def readable_runs_q(user: Any) -> Q:
    """A filter on Run: the runs ``user`` may read (see the module docstring)."""
    if not _active(user):
        return NOTHING
    if is_admin(user) or has_role(user, BUILDERS):
        return Q()
    ApprovalRequest = apps.get_model("approvals", "ApprovalRequest")
    decidable = ApprovalRequest.objects.filter(run_id=OuterRef("pk")).filter(decider_q(user))
    return Q(created_by=user) | operates_q(user, graph_ref="graph_version__graph_id") | Q(Exists(decidable))


def readable_runs(user: Any, queryset: Any = None) -> Any:
    """``queryset`` (default: every Run) narrowed to the runs ``user`` may read."""
    if queryset is None:
        queryset = apps.get_model("runs", "Run").objects.all()
    return queryset.filter(readable_runs_q(user))


def can_read_run(user: Any, run: Any) -> bool:
    """Whether ``user`` may read ``run`` (one query at most; none for admins and builders)."""
    if not _active(user):
        return False
    if is_admin(user) or has_role(user, BUILDERS):
        return True
    if run.created_by_id is not None and run.created_by_id == user.pk:
        return True
    return type(run).objects.filter(pk=run.pk).filter(readable_runs_q(user)).exists()


def can_operate_graph(user: Any, graph: Any) -> bool:
    """Whether ``user`` may start runs of ``graph`` and act on its runs."""
    if not _active(user):
        return False
    if user.is_superuser:
        return True
    return type(graph).objects.filter(pk=graph.pk).filter(operates_q(user)).exists()


def may_operate_some_graph(user: Any) -> bool:
    """Whether ``user`` may operate at least one graph: an operator, a superuser, or
    named (directly or through a group) on some graph. Lets a start request from a user
    who can start nothing be refused before its body is read."""
    if not _active(user):
        return False
    if has_role(user, OPERATORS):
        return True
    Graph = apps.get_model("graphs", "Graph")
    names = _group_names(user)
    return Graph.objects.filter(Q(operators=user) | Q(operator_groups__name__in=sorted(names))).exists()


def can_act(user: Any, run: Any, action: str) -> bool:
    """Whether ``user`` may take ``action`` (one of RUN_ACTIONS) on ``run``: an operator
    of the run's graph. Raises ValueError for an unknown action."""
    if action not in RUN_ACTIONS:
        raise ValueError(f"action must be one of {RUN_ACTIONS}, not {action!r}")
    return can_operate_graph(user, run.graph_version.graph)


def audit_denied(user: Any, obj: Any, *, action: str, status: int, **data: Any) -> None:
    """Record a refused read (``status`` 404) or action (403) on ``obj``: who, what
    (``action``, e.g. ``run.read``, ``run.cancel``, ``approval.decide``), which object.
    One entry per denial, in the user's chain (``user:<id>``)."""
    name = user.get_username() if _active(user) else "anonymous"
    scope = f"user:{user.pk}" if _active(user) else "auth"
    audit_in(scope, name, "access.denied", obj, denied=action, status=status, **data)


class RunHidden(NotFoundError):
    """The user may not read this run (or its step, events, approval): answered as 404,
    so a run's existence is not revealed. Audited before it is raised."""


class ActionNotAllowed(ForbiddenError):
    """The user may read the run but not take this action on it: answered as 403.
    Audited before it is raised."""


def require_read(user: Any, run: Any, *, action: str = "run.read", obj: Any = None) -> None:
    """Raise RunHidden (after auditing it) unless ``user`` may read ``run``. ``obj`` is
    what was asked for (the run by default; a step or an approval of it)."""
    if not can_read_run(user, run):
        target = run if obj is None else obj
        audit_denied(user, target, action=action, status=404, **({} if target is run else {"run": run.pk}))
        raise RunHidden(f"run {run.pk}")


def require_act(user: Any, run: Any, action: str) -> None:
    """Raise RunHidden unless ``user`` may read ``run``, then ActionNotAllowed unless
    they may take ``action`` (one of RUN_ACTIONS) on it; each denial audited."""
    require_read(user, run, action=f"run.{action}")
    if not can_act(user, run, action):
        audit_denied(user, run, action=f"run.{action}", status=403)
        raise ActionNotAllowed(f"{user.get_username()} may not {action} run {run.pk}: only operators of its graph may.")


def can_decide(user: Any, request: Any) -> bool:
    """Whether ``user`` may decide approval ``request`` (see :func:`decider_q`)."""
    if not _active(user):
        return False
    if user.is_superuser:
        return True
    return type(request).objects.filter(pk=request.pk).filter(decider_q(user)).exists()


def can_reassign(user: Any, request: Any) -> bool:
    """Whether ``user`` may give approval ``request`` to another user or group: admins and
    the operators of its run's graph (who own how its runs proceed)."""
    if not _active(user):
        return False
    return is_admin(user) or can_operate_graph(user, request.run.graph_version.graph)


def require_reassign(user: Any, request: Any) -> None:
    """Raise RunHidden unless ``user`` may read the request's run, then ActionNotAllowed
    unless they may reassign ``request``; each denial audited."""
    require_read(user, request.run, action="approval.reassign", obj=request)
    if not can_reassign(user, request):
        audit_denied(user, request, action="approval.reassign", status=403, run=request.run_id)
        raise ActionNotAllowed(f"{user.get_username()} may not reassign approval {request.pk}: operators of its graph and admins may")


def require_decide(user: Any, request: Any) -> None:
    """Raise RunHidden unless ``user`` may read the request's run, then ActionNotAllowed
    unless they may decide ``request``; each denial audited (object: the request)."""
    require_read(user, request.run, action="approval.decide", obj=request)
    if not can_decide(user, request):
        audit_denied(user, request, action="approval.decide", status=403, run=request.run_id)
        raise ActionNotAllowed(f"{user.get_username()} may not decide approval {request.pk}")
