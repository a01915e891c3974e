"""The permission matrix: every role and an anonymous client against every endpoint, with
the expected status asserted for each. Writes get fresh objects per role, so a 2xx for
one role never turns into a 409 for the next."""
from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from runs.engine import api as engine
from tests.support.approvals import version_of
from tests.support.specs import graph, node, publish
from tests.support.world import ROLE_NAMES, World, linear_spec

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]

USERS = ROLE_NAMES[1:]
_names = itertools.count()


def allowed(status: int, *roles: str, others: int = 403) -> dict[str, int]:
    """Expected status per role: ``status`` for ``roles`` (all users when none given),
    ``others`` for the remaining users, 401 for anonymous."""
    chosen = roles or USERS
    return {"anonymous": 401, **{r: (status if r in chosen else others) for r in USERS}}


# Who may read the World's runs: the waiting run's approvals are open to the approvers
# group and the graph's named approver; every run was started by ``starter``.
READERS = ("builder", "operator", "approver", "graph_approver", "starter", "admin")


def reads(status: int = 200) -> dict[str, int]:
    """A read of a run the World made (a waiting run, with an approval): ``status`` for
    READERS, 404 for the outsider (the run is not revealed), 401 for anonymous."""
    return allowed(status, *READERS, others=404)


def acts(status: int, *, readers: tuple[str, ...] = ("builder", "starter")) -> dict[str, int]:
    """An operator action: ``status`` for operator and admin, 403 for ``readers`` who may
    read the run but not act on it, 404 for everyone else (401 anonymous)."""
    expect = allowed(status, "operator", "admin", others=404)
    return {**expect, **{r: 403 for r in readers}}


def fresh_graph_payload() -> dict[str, Any]:
    spec = linear_spec()
    spec["name"] = f"matrix-{next(_names)}"
    return spec


def claimed_approval(world: World) -> int:
    """A fresh waiting run's approval, claimed by ``approver``."""
    from approvals.services import approval_claim

    approval = world.approval_of(world.waiting_run())
    approval_claim(approval_id=approval.pk, user=world.users["approver"])
    return approval.pk


def draft_graph(world: World) -> int:
    """An unpublished graph with a valid draft (nothing pinned to it)."""
    from builder.services import graph_create

    spec = fresh_graph_payload()
    return graph_create(name=spec["name"], draft=spec).pk


def provider_payload() -> dict[str, Any]:
    """A new provider for the app (an OpenAI-compatible server that takes no key)."""
    return {"name": f"matrix-{next(_names)}", "kind": "openai_compatible", "base_url": "http://127.0.0.1:9/v1", "default_model": "local-7b"}


def stored_provider() -> str:
    """The name of a fresh provider added in the app."""
    from runs.providers.services import provider_credential_create

    return provider_credential_create(data=provider_payload()).name


def mcp_payload() -> dict[str, Any]:
    """A new MCP server over HTTP (nothing answers there: listing its tools fails and is recorded)."""
    return {"name": f"matrix-{next(_names)}", "transport": "http", "url": "http://127.0.0.1:9/mcp"}


def stored_mcp_server() -> str:
    """The name of a fresh MCP server stored without listing its tools."""
    from runs.tools.mcp_servers.services import mcp_server_create

    return mcp_server_create(data=mcp_payload(), refresh=False).name


def published_graph(world: World) -> tuple[int, int]:
    """A fresh graph with version 1 published from its draft: (graph id, draft revision)."""
    from builder.services import graph_import

    version = graph_import(spec=fresh_graph_payload()).version
    return version.graph_id, version.graph.draft_revision


def draft_save(world: World) -> tuple[str, Any]:
    from graphs.models import Graph

    graph = Graph.objects.get(pk=draft_graph(world))
    return f"/api/v1/graphs/{graph.pk}/", {"spec": {**graph.draft, "description": "saved"}, "base_revision": graph.draft_revision}


def restore(world: World) -> tuple[str, Any]:
    graph_id, revision = published_graph(world)
    return f"/api/v1/graphs/{graph_id}/versions/1/restore/", {"base_revision": revision}


@dataclass
class Endpoint:
    name: str
    method: str
    make: Callable[[World], tuple[str, Any]]  # -> (path, body); called once per role
    expect: dict[str, int]


def _g(world: World) -> int:
    return world.approval_version.graph_id


def own_token(world: World, role: str = "viewer") -> int:
    """A fresh API token of ``role`` (the viewer by default)."""
    from accounts.tokens import token_create

    return token_create(user=world.users[role], name=f"matrix-{next(_names)}")[0].pk


def fresh_user(world: World) -> int:
    """A fresh user with no group."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(f"matrix-user-{next(_names)}").pk


def fresh_group(world: World) -> int:
    from django.contrib.auth.models import Group

    return Group.objects.create(name=f"matrix-group-{next(_names)}").pk


def webhook(world: World) -> int:
    """A fresh signed webhook trigger of the World's approval graph (made by its admin)."""
    from triggers.services import trigger_create

    graph = world.approval_version.graph
    return trigger_create(graph=graph, name=f"matrix-hook-{next(_names)}", user=world.users["admin"]).trigger.pk


def schedule(world: World) -> int:
    """A fresh schedule of the World's approval graph (made by its admin)."""
    from triggers.schedules import schedule_create

    graph = world.approval_version.graph
    return schedule_create(graph=graph, name=f"matrix-schedule-{next(_names)}", user=world.users["admin"], cron_expression="0 3 * * *",
                           run_input={"name": "Ada"}).pk


# Callbacks post to a local address in the matrix: the outbound guard is told to allow it
# for those rows (test_permission_matrix), as the callbacks' own tests do.
CALLBACK_URL = "http://127.0.0.1:9/hooks/matrix"


def callback(world: World) -> int:
    """A fresh completion callback of the World's approval graph (made by its admin)."""
    from triggers.callback_services import callback_create

    graph = world.approval_version.graph
    made = callback_create(graph=graph, user=world.users["admin"], name=f"matrix-cb-{next(_names)}", url=CALLBACK_URL, events=["succeeded"])
    return made.callback.pk


def settled_delivery(world: World) -> int:
    """A fresh undeliverable delivery of a fresh callback (what an operator redelivers)."""
    from triggers.models import CallbackDelivery

    key = f"matrix:{next(_names)}"
    return CallbackDelivery.objects.create(
        callback_id=callback(world), event="succeeded", event_key=key, message_id=f"msg_{key}", payload={}, status="failed", attempts=8,
        last_error="HTTP 500",
    ).pk


def _cb(w: World, action: str = "") -> str:
    return f"/api/v1/graphs/{_g(w)}/callbacks/{callback(w)}/{action + '/' if action else ''}"


def _s(w: World, action: str = "") -> str:
    return f"/api/v1/graphs/{_g(w)}/schedules/{schedule(w)}/{action + '/' if action else ''}"


ENDPOINTS = [
    Endpoint("graphs_list", "get", lambda w: ("/api/v1/graphs/", None), allowed(200)),
    Endpoint("graphs_create", "post", lambda w: ("/api/v1/graphs/", {"name": f"new-{next(_names)}"}), allowed(201, "builder", "admin")),
    Endpoint("graphs_read", "get", lambda w: (f"/api/v1/graphs/{_g(w)}/", None), allowed(200)),
    Endpoint("graphs_update", "patch", lambda w: (f"/api/v1/graphs/{_g(w)}/", {"description": "edited"}), allowed(200, "builder", "admin")),
    Endpoint("graphs_update_draft", "patch", draft_save, allowed(200, "builder", "admin")),
    Endpoint("graphs_duplicate", "post", lambda w: (f"/api/v1/graphs/{_g(w)}/duplicate/", {"name": f"dup-{next(_names)}"}), allowed(201, "builder", "admin")),
    Endpoint("graphs_delete", "delete", lambda w: (f"/api/v1/graphs/{draft_graph(w)}/", None), allowed(204, "builder", "admin")),
    Endpoint("graphs_validate", "post", lambda w: ("/api/v1/graphs/validate/", linear_spec()), allowed(200)),
    Endpoint("graphs_import", "post", lambda w: ("/api/v1/graphs/import/", fresh_graph_payload()), allowed(201, "builder", "admin")),
    Endpoint("graphs_export", "get", lambda w: (f"/api/v1/graphs/{_g(w)}/export/", None), allowed(200)),
    Endpoint("versions_list", "get", lambda w: (f"/api/v1/graphs/{_g(w)}/versions/", None), allowed(200)),
    Endpoint("versions_publish", "post", lambda w: (f"/api/v1/graphs/{draft_graph(w)}/versions/", None), allowed(201, "builder", "admin")),
    Endpoint("versions_read", "get", lambda w: (f"/api/v1/graphs/{_g(w)}/versions/1/", None), allowed(200)),
    Endpoint("versions_diff", "get", lambda w: (f"/api/v1/graphs/{_g(w)}/diff/?from=1&to=1", None), allowed(200)),
    Endpoint("versions_restore", "post", restore, allowed(200, "builder", "admin")),
    Endpoint(
        "nodes_test", "post", lambda w: (f"/api/v1/graphs/{draft_graph(w)}/nodes/double/test/", {"state": {"x": 2}}), allowed(200, "builder", "admin")
    ),
    Endpoint(
        "draft_run", "post", lambda w: (f"/api/v1/graphs/{draft_graph(w)}/draft/run/", {"input": {"x": 2}}), allowed(201, "builder", "admin")
    ),
    Endpoint("node_kinds", "get", lambda w: ("/api/v1/node-kinds/", None), allowed(200)),
    Endpoint("tools", "get", lambda w: ("/api/v1/tools/", None), allowed(200)),
    Endpoint("models", "get", lambda w: ("/api/v1/models/", None), allowed(200)),
    Endpoint("expressions_check", "post", lambda w: ("/api/v1/expressions/check/", {"kind": "expression", "source": "x + 1", "state_keys": ["x"]}), allowed(200)),
    Endpoint("webhooks_list", "get", lambda w: (f"/api/v1/graphs/{_g(w)}/webhooks/", None), allowed(200, "builder", "admin")),
    Endpoint("webhooks_create", "post", lambda w: (f"/api/v1/graphs/{_g(w)}/webhooks/", {"name": f"hook-{next(_names)}"}),
             # A builder who is no operator of the graph may not make its runs act as himself:
             # 400 naming run_as (he may name an operator).
             {**allowed(201, "builder", "admin"), "builder": 400}),
    Endpoint("webhooks_read", "get", lambda w: (f"/api/v1/graphs/{_g(w)}/webhooks/{webhook(w)}/", None), allowed(200, "builder", "admin")),
    Endpoint("webhooks_update", "patch", lambda w: (f"/api/v1/graphs/{_g(w)}/webhooks/{webhook(w)}/", {"enabled": False}), allowed(200, "builder", "admin")),
    Endpoint("webhooks_delete", "delete", lambda w: (f"/api/v1/graphs/{_g(w)}/webhooks/{webhook(w)}/", None), allowed(204, "builder", "admin")),
    Endpoint("webhooks_rotate_secret", "post", lambda w: (f"/api/v1/graphs/{_g(w)}/webhooks/{webhook(w)}/rotate-secret/", None), allowed(200, "builder", "admin")),
    Endpoint("webhooks_deliveries", "get", lambda w: (f"/api/v1/graphs/{_g(w)}/webhooks/{webhook(w)}/deliveries/", None), allowed(200, "builder", "admin")),
    Endpoint("graph_publish_check", "get", lambda w: (f"/api/v1/graphs/{_g(w)}/publish-check/", None), allowed(200, "builder", "admin")),
    Endpoint("webhooks_listen", "post", lambda w: (f"/api/v1/graphs/{_g(w)}/webhooks/{webhook(w)}/listen/", {"seconds": 5}), allowed(200, "builder", "admin")),
    Endpoint("webhooks_listen_state", "get", lambda w: (f"/api/v1/graphs/{_g(w)}/webhooks/{webhook(w)}/listen/?after=0", None), allowed(200, "builder", "admin")),
    Endpoint("webhooks_listen_stop", "delete", lambda w: (f"/api/v1/graphs/{_g(w)}/webhooks/{webhook(w)}/listen/", None), allowed(204, "builder", "admin")),
    Endpoint("schedules_list", "get", lambda w: (f"/api/v1/graphs/{_g(w)}/schedules/", None), allowed(200, "builder", "admin")),
    Endpoint("schedules_create", "post", lambda w: (f"/api/v1/graphs/{_g(w)}/schedules/", {"name": f"sch-{next(_names)}", "cron": "0 3 * * *", "input": {"name": "Ada"}}),
             # As for a webhook: a builder who is no operator of the graph gets 400 naming run_as.
             {**allowed(201, "builder", "admin"), "builder": 400}),
    Endpoint("schedules_read", "get", lambda w: (_s(w), None), allowed(200, "builder", "admin")),
    Endpoint("schedules_update", "patch", lambda w: (_s(w), {"cron": "0 4 * * *"}), allowed(200, "builder", "admin")),
    Endpoint("schedules_delete", "delete", lambda w: (_s(w), None), allowed(204, "builder", "admin")),
    Endpoint("schedules_pause", "post", lambda w: (_s(w, "pause"), None), allowed(200, "builder", "admin")),
    Endpoint("schedules_resume", "post", lambda w: (_s(w, "resume"), None), allowed(200, "builder", "admin")),
    Endpoint("schedules_run_now", "post", lambda w: (_s(w, "run-now"), None), allowed(201, "builder", "admin")),
    Endpoint("schedules_ticks", "get", lambda w: (_s(w, "ticks"), None), allowed(200, "builder", "admin")),
    Endpoint("callbacks_list", "get", lambda w: (f"/api/v1/graphs/{_g(w)}/callbacks/", None), allowed(200, "builder", "admin")),
    Endpoint("callbacks_create", "post",
             lambda w: (f"/api/v1/graphs/{_g(w)}/callbacks/", {"name": f"cb-{next(_names)}", "url": CALLBACK_URL, "events": ["succeeded"]}),
             allowed(201, "builder", "admin")),
    Endpoint("callbacks_read", "get", lambda w: (_cb(w), None), allowed(200, "builder", "admin")),
    Endpoint("callbacks_update", "patch", lambda w: (_cb(w), {"enabled": False}), allowed(200, "builder", "admin")),
    Endpoint("callbacks_delete", "delete", lambda w: (_cb(w), None), allowed(204, "builder", "admin")),
    Endpoint("callbacks_rotate_secret", "post", lambda w: (_cb(w, "rotate-secret"), None), allowed(200, "builder", "admin")),
    # The delivery log and redelivery: the graph's operators as well as builders.
    Endpoint("callback_deliveries_list", "get", lambda w: (f"/api/v1/graphs/{_g(w)}/callback-deliveries/", None), allowed(200, "builder", "operator", "admin")),
    Endpoint("callback_deliveries_redeliver", "post",
             lambda w: (f"/api/v1/graphs/{_g(w)}/callback-deliveries/{settled_delivery(w)}/redeliver/", None), allowed(200, "builder", "operator", "admin")),
    Endpoint("graph_pins_set", "put", lambda w: (f"/api/v1/graphs/{draft_graph(w)}/draft/pins/double/", {"data": {"x": 2}}), allowed(200, "builder", "admin")),
    Endpoint("graph_pins_clear", "delete", lambda w: (f"/api/v1/graphs/{draft_graph(w)}/draft/pins/double/", None), allowed(200, "builder", "admin")),
    Endpoint("graph_draft_preview", "post",
             lambda w: (f"/api/v1/graphs/{draft_graph(w)}/draft/preview/", {"kind": "expression", "source": "x + 1", "state": {"x": 2}}),
             allowed(200, "builder", "admin")),
    Endpoint("runs_list", "get", lambda w: ("/api/v1/runs/?status=waiting", None), allowed(200)),
    Endpoint("runs_start", "post", lambda w: ("/api/v1/runs/", {"graph": _g(w), "input": {"name": "Ada"}}), allowed(201, "operator", "admin")),
    Endpoint("runs_read", "get", lambda w: (f"/api/v1/runs/{w.waiting_run().pk}/", None), reads()),
    Endpoint("runs_cancel", "post", lambda w: (f"/api/v1/runs/{w.queued_run().pk}/cancel/", {"reason": "test"}), acts(200)),
    # 200 for every user: refusals are per run in the body (tests/runs/api/test_run_list.py checks them).
    Endpoint("runs_cancel_bulk", "post", lambda w: ("/api/v1/runs/cancel/", {"runs": [w.queued_run().pk], "reason": "test"}), allowed(200)),
    Endpoint("runs_summary", "get", lambda w: ("/api/v1/runs/summary/?hours=24", None), allowed(200)),
    Endpoint("runs_resume", "post", lambda w: (f"/api/v1/runs/{w.failed_run().pk}/resume/", {}), acts(200)),
    Endpoint("runs_retry", "post", lambda w: (f"/api/v1/runs/{w.failed_run().pk}/retry/", None), acts(200)),
    Endpoint(
        "runs_fork",
        "post",
        lambda w: (lambda run: (f"/api/v1/runs/{run.pk}/fork/", {"step": w.step(run, "start").pk, "state_patch": {"x": 5}}))(w.succeeded_run()),
        acts(201),
    ),
    Endpoint("runs_actions", "get", lambda w: (f"/api/v1/runs/{w.waiting_run().pk}/actions/", None), reads()),
    Endpoint("runs_graph", "get", lambda w: (f"/api/v1/runs/{w.waiting_run().pk}/graph/", None), reads()),
    Endpoint("runs_resume_preview", "post", lambda w: (f"/api/v1/runs/{w.failed_run().pk}/resume/preview/", None), acts(200)),
    Endpoint("runs_retry_preview", "post", lambda w: (f"/api/v1/runs/{w.failed_run().pk}/retry/preview/", None), acts(200)),
    Endpoint(
        "runs_fork_preview",
        "post",
        lambda w: (lambda run: (f"/api/v1/runs/{run.pk}/fork/preview/", {"step": w.step(run, "start").pk, "state_patch": {"x": 5}}))(w.succeeded_run()),
        acts(200),
    ),
    # A run the caller may not read is answered like an unknown one: a field error, not a 404.
    Endpoint("runs_compare", "get", lambda w: (f"/api/v1/runs/compare/?a={w.waiting_run().pk}&b={w.waiting_run().pk}", None), allowed(200, *READERS, others=400)),
    Endpoint("runs_steps", "get", lambda w: (f"/api/v1/runs/{w.waiting_run().pk}/steps/", None), reads()),
    Endpoint("steps_read", "get", lambda w: (f"/api/v1/steps/{w.step(w.waiting_run(), 'draft').pk}/", None), reads()),
    Endpoint("steps_state", "get", lambda w: (f"/api/v1/steps/{w.step(w.waiting_run(), 'draft').pk}/state/", None), reads()),
    Endpoint("runs_events", "get", lambda w: (f"/api/v1/runs/{w.waiting_run().pk}/events/?after=0", None), reads()),
    Endpoint("costs", "get", lambda w: ("/api/v1/costs/?group_by=model", None), allowed(200)),
    Endpoint("audit", "get", lambda w: ("/api/v1/audit/", None), allowed(200, "admin")),
    Endpoint("costs-totals", "get", lambda w: ("/api/v1/costs/totals/", None), allowed(200)),
    Endpoint("costs-budgets", "get", lambda w: ("/api/v1/costs/budgets/", None), allowed(200)),
    Endpoint("costs-export", "get", lambda w: ("/api/v1/costs/export/?group_by=graph", None), allowed(200)),
    Endpoint("audit-verify", "get", lambda w: ("/api/v1/audit/verify/", None), allowed(200, "admin")),
    Endpoint("audit-facets", "get", lambda w: ("/api/v1/audit/facets/", None), allowed(200, "admin")),
    Endpoint("audit-export", "get", lambda w: ("/api/v1/audit/export/?kind=jsonl", None), allowed(200, "admin")),
    Endpoint("workers", "get", lambda w: ("/api/v1/workers/", None), allowed(200, "operator", "admin")),
    # Run alerts are for the graph's owners: builders, its operators (the operators group:
    # the graph names none), its creator, admins.
    Endpoint("alerts", "get", lambda w: (f"/api/v1/graphs/{w.approval_version.graph_id}/alerts/", None), allowed(200, "builder", "operator", "admin")),
    Endpoint(
        "alerts-set", "put",
        lambda w: (f"/api/v1/graphs/{w.approval_version.graph_id}/alerts/", {"on_failed": True, "on_parked": False}),
        allowed(200, "builder", "operator", "admin"),
    ),
    Endpoint("approvals_mine", "get", lambda w: ("/api/v1/approvals/", None), allowed(200)),
    Endpoint("approvals_all", "get", lambda w: ("/api/v1/approvals/all/", None), allowed(200, "admin")),
    Endpoint("approvals_read", "get", lambda w: (f"/api/v1/approvals/{w.approval_of(w.waiting_run()).pk}/", None), reads()),
    # A run's pending requests (the run page's Decide link): whoever may read the run.
    Endpoint("approvals_of_run", "get", lambda w: (f"/api/v1/approvals/of-run/{w.waiting_run().pk}/", None), reads()),
    Endpoint(
        "approvals_decide",
        "post",
        lambda w: (lambda a: (f"/api/v1/approvals/{a.pk}/decide/", {"decision": "approve", "comment": "ok", "version": version_of(a)}))(w.approval_of(w.waiting_run())),
        {**allowed(200, "approver", "graph_approver", "admin", others=403), "viewer": 404},
    ),
    Endpoint("approvals_inbox", "get", lambda w: ("/api/v1/approvals/inbox/?list=group&q=Ada", None), allowed(200)),
    Endpoint("approvals_inbox_counts", "get", lambda w: ("/api/v1/approvals/inbox/counts/", None), allowed(200)),
    Endpoint(
        "approvals_claim", "post", lambda w: (f"/api/v1/approvals/{w.approval_of(w.waiting_run()).pk}/claim/", {}),
        {**allowed(200, "approver", "graph_approver", "admin", others=403), "viewer": 404},
    ),
    Endpoint("approvals_claim_many", "post", lambda w: ("/api/v1/approvals/claim/", {"ids": [w.approval_of(w.waiting_run()).pk]}), allowed(200)),
    Endpoint(
        "approvals_hand_back", "post", lambda w: (f"/api/v1/approvals/{claimed_approval(w)}/hand-back/", {}),
        {**allowed(200, "approver", "admin", others=403), "viewer": 404},
    ),
    Endpoint(
        "approvals_reassign", "post", lambda w: (f"/api/v1/approvals/{w.approval_of(w.waiting_run()).pk}/reassign/", {"to_group": "approvers"}),
        {**allowed(200, "operator", "admin", others=403), "viewer": 404},
    ),
    Endpoint("schema", "get", lambda w: ("/api/schema/", None), allowed(200)),
    Endpoint("providers_list", "get", lambda w: ("/api/v1/providers/", None), allowed(200)),
    Endpoint("providers_create", "post", lambda w: ("/api/v1/providers/", provider_payload()), allowed(201, "admin")),
    Endpoint("providers_update", "patch", lambda w: (f"/api/v1/providers/{stored_provider()}/", {"label": "edited"}), allowed(200, "admin")),
    Endpoint("providers_delete", "delete", lambda w: (f"/api/v1/providers/{stored_provider()}/", None), allowed(204, "admin")),
    # The built-in mock answers offline; a stored one would need a server.
    Endpoint("providers_test", "post", lambda w: ("/api/v1/providers/mock/test/", {}), allowed(200, "admin")),
    # MCP servers: staff only, as providers' writes.
    Endpoint("mcp_servers_list", "get", lambda w: ("/api/v1/mcp-servers/", None), allowed(200, "admin")),
    Endpoint("mcp_servers_create", "post", lambda w: ("/api/v1/mcp-servers/", mcp_payload()), allowed(201, "admin")),
    Endpoint("mcp_servers_read", "get", lambda w: (f"/api/v1/mcp-servers/{stored_mcp_server()}/", None), allowed(200, "admin")),
    Endpoint("mcp_servers_update", "patch", lambda w: (f"/api/v1/mcp-servers/{stored_mcp_server()}/", {"label": "edited"}), allowed(200, "admin")),
    Endpoint("mcp_servers_delete", "delete", lambda w: (f"/api/v1/mcp-servers/{stored_mcp_server()}/", None), allowed(204, "admin")),
    Endpoint("mcp_servers_test", "post", lambda w: (f"/api/v1/mcp-servers/{stored_mcp_server()}/test/", None), allowed(200, "admin")),
    # API tokens: every user their own; staff also everyone's (?all=true) and for another user.
    Endpoint("tokens_list", "get", lambda w: ("/api/v1/tokens/", None), allowed(200)),
    Endpoint("tokens_list_all", "get", lambda w: ("/api/v1/tokens/?all=true", None), allowed(200, "admin")),
    Endpoint("tokens_create", "post", lambda w: ("/api/v1/tokens/", {"name": f"matrix-{next(_names)}"}), allowed(201)),
    Endpoint("tokens_create_for_another", "post", lambda w: ("/api/v1/tokens/", {"name": "for viewer", "user": "viewer"}),
             # The viewer asking for himself is asking for his own.
             {**allowed(201, "admin", "viewer")}),
    # Another user's token is not revealed to a non-staff caller: 404.
    Endpoint("tokens_revoke", "post", lambda w: (f"/api/v1/tokens/{own_token(w)}/revoke/", None), allowed(200, "viewer", "admin", others=404)),
    # Users, groups and roles: staff only.
    Endpoint("users_list", "get", lambda w: ("/api/v1/users/", None), allowed(200, "admin")),
    Endpoint("users_create", "post", lambda w: ("/api/v1/users/", {"username": f"matrix-new-{next(_names)}", "invite": True}), allowed(201, "admin")),
    Endpoint("users_read", "get", lambda w: (f"/api/v1/users/{fresh_user(w)}/", None), allowed(200, "admin")),
    Endpoint("users_update", "patch", lambda w: (f"/api/v1/users/{fresh_user(w)}/", {"is_active": False}), allowed(200, "admin")),
    Endpoint("users_invite", "post", lambda w: (f"/api/v1/users/{fresh_user(w)}/invite/", None), allowed(200, "admin")),
    Endpoint("groups_list", "get", lambda w: ("/api/v1/groups/", None), allowed(200, "admin")),
    Endpoint("groups_create", "post", lambda w: ("/api/v1/groups/", {"name": f"matrix-new-group-{next(_names)}"}), allowed(201, "admin")),
    Endpoint("groups_update", "patch", lambda w: (f"/api/v1/groups/{fresh_group(w)}/", {"members": ["viewer"]}), allowed(200, "admin")),
    # The pickers' search: builders (who name operators and approvers) and staff.
    Endpoint("principals_search", "get", lambda w: ("/api/v1/principals/?q=a", None), allowed(200, "builder", "admin")),
]


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=[e.name for e in ENDPOINTS])
def test_permission_matrix(world: World, endpoint: Endpoint, settings: Any) -> None:
    if endpoint.name.startswith("callback"):
        settings.BALLAST_OUTBOUND_ALLOW = ["127.0.0.1"]
    got: dict[str, int] = {}
    for role in ROLE_NAMES:
        path, body = endpoint.make(world)
        with engine.local_mode():  # runs started here are not handed to django-q
            call = getattr(world.clients[role], endpoint.method)
            response = call(path, body, format="json") if body is not None else call(path)
        got[role] = response.status_code
        if response.status_code >= 400 and response.get("Content-Type", "").startswith("application/json"):
            assert set(response.json()["error"]) >= {"code", "message", "fields"}
    assert got == endpoint.expect


def test_the_matrix_covers_every_api_operation() -> None:
    """A new endpoint must be added to the matrix (operation ids from the schema)."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    operations = {op["operationId"] for item in schema["paths"].values() for op in item.values() if isinstance(op, dict) and "operationId" in op}
    covered = {
        "graphs_list", "graphs_create", "graphs_read", "graphs_update", "graphs_delete", "graphs_validate", "graphs_import",
        "graphs_export", "graph_versions_list", "graph_versions_publish", "graph_versions_read", "graph_versions_diff",
        "runs_list", "runs_start", "runs_read", "runs_cancel", "runs_resume", "runs_retry", "runs_fork", "runs_steps",
        "runs_actions", "runs_graph", "runs_resume_preview", "runs_retry_preview", "runs_fork_preview", "runs_compare", "runs_cancel_bulk", "runs_summary",
        "steps_read", "steps_state", "runs_events", "costs_aggregate", "audit_list", "approvals_mine", "approvals_all", "approvals_read",
        "approvals_decide", "approvals_of_run", "providers_list", "providers_create", "providers_update", "providers_delete", "providers_test",
        "graphs_duplicate", "graph_versions_restore", "graph_nodes_test", "graph_draft_run", "node_kinds_list", "tools_list",
        "models_list", "expressions_check", "approvals_inbox", "approvals_inbox_counts", "approvals_claim",
        "approvals_claim_many", "approvals_hand_back", "approvals_reassign",
        "costs_totals", "costs_budgets", "costs_export", "audit_verify", "audit_facets", "audit_export", "workers_list",
        "graphs_alerts_get", "graphs_alerts_set", "webhooks_list", "webhooks_create", "webhooks_read", "webhooks_update",
        "webhooks_delete", "webhooks_rotate_secret", "webhooks_deliveries", "webhooks_listen", "webhooks_listen_state", "webhooks_listen_stop",
        "graph_publish_check", "schedules_list", "schedules_create", "schedules_read", "schedules_update", "schedules_delete",
        "schedules_pause", "schedules_resume", "schedules_run_now", "schedules_ticks",
        "tokens_list", "tokens_create", "tokens_revoke", "users_list", "users_create", "users_read", "users_update",
        "users_invite", "groups_list", "groups_create", "groups_update", "principals_search",
        "mcp_servers_list", "mcp_servers_create", "mcp_servers_read", "mcp_servers_update", "mcp_servers_delete", "mcp_servers_test",
        "callbacks_list", "callbacks_create", "callbacks_read", "callbacks_update", "callbacks_delete", "callbacks_rotate_secret",
        "callback_deliveries_list", "callback_deliveries_redeliver", "graph_pins_set", "graph_pins_clear", "graph_draft_preview",
    }  # fmt: skip
    assert operations == covered


def test_graph_named_approver_may_decide_without_the_approvers_group(world: World) -> None:
    graph_ = world.approval_version.graph
    graph_.approvers.add(world.users["viewer"])
    run = world.waiting_run()
    approval = world.approval_of(run)
    builder = world.clients["builder"].post(f"/api/v1/approvals/{approval.pk}/decide/", {"version": version_of(approval.pk), "decision": "approve"}, format="json")
    assert builder.status_code == 403 and builder.json()["error"]["code"] == "not_allowed"
    mine = world.clients["viewer"].get("/api/v1/approvals/").json()
    assert [a["id"] for a in mine["results"]] == [approval.pk] and mine["results"][0]["may_decide"] is True
    assert world.clients["builder"].get("/api/v1/approvals/").json()["count"] == 0
    with engine.local_mode():
        ok = world.clients["viewer"].post(f"/api/v1/approvals/{approval.pk}/decide/", {"version": version_of(approval.pk), "decision": "approve"}, format="json")
    assert ok.status_code == 200 and ok.json()["decided_by"] == "viewer"


def test_request_naming_its_approvers_excludes_the_approvers_group(world: World) -> None:
    spec = graph(
        [node("start", "start"), node("gate", "approval", config={"prompt": "ok?", "approvers": ["operator"]}), node("end", "end")],
        [{"source": "start", "target": "gate"}, {"source": "gate", "target": "end", "source_handle": "approved"}],
    )
    from tests.support.specs import run_local

    run = run_local(publish(spec), {})
    approval = world.approval_of(run)
    if approval.approvers != ["operator"]:
        pytest.skip("the approval node kind does not take named approvers")
    # The approvers group may neither decide nor read it (the run is not theirs): 404;
    # a builder reads every run, so is refused the decision itself: 403.
    denied = world.clients["approver"].post(f"/api/v1/approvals/{approval.pk}/decide/", {"version": version_of(approval.pk), "decision": "approve"}, format="json")
    assert denied.status_code == 404
    refused = world.clients["builder"].post(f"/api/v1/approvals/{approval.pk}/decide/", {"version": version_of(approval.pk), "decision": "approve"}, format="json")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_allowed"
    with engine.local_mode():
        assert world.clients["operator"].post(f"/api/v1/approvals/{approval.pk}/decide/", {"version": version_of(approval.pk), "decision": "approve"}, format="json").status_code == 200


def test_session_auth_enforces_csrf_and_docs_need_a_login(world: World) -> None:
    from rest_framework.test import APIClient

    browser = APIClient(enforce_csrf_checks=True)
    assert browser.get("/api/docs/").status_code == 302  # to the login page
    assert browser.login(username="operator", password="pw-operator")
    assert browser.get("/api/v1/runs/").status_code == 200
    assert browser.get("/api/docs/").status_code == 200
    refused = browser.post("/api/v1/runs/", {"graph": _g(world), "input": {"name": "x"}}, format="json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]["message"]
    browser.get("/admin/login/")  # sets the csrftoken cookie
    token = browser.cookies["csrftoken"].value
    with engine.local_mode():
        accepted = browser.post("/api/v1/runs/", {"graph": _g(world), "input": {"name": "x"}}, format="json", HTTP_X_CSRFTOKEN=token)
    assert accepted.status_code == 201


def test_revoked_token_and_inactive_user_are_refused(world: World) -> None:
    from accounts.models import ApiToken
    from accounts.tokens import token_revoke
    from tests.support.world import client_with_token

    client = client_with_token(world.users["viewer"])
    assert client.get("/api/v1/graphs/").status_code == 200
    token = ApiToken.objects.filter(user=world.users["viewer"]).order_by("-id").first()
    assert token_revoke(token=token, by="test")
    assert client.get("/api/v1/graphs/").status_code == 401
    other = client_with_token(world.users["builder"])
    world.users["builder"].is_active = False
    world.users["builder"].save()
    assert other.get("/api/v1/graphs/").status_code == 401
