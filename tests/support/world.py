"""API test support: one user per role with an API token, runs in each status driven in-process, and the specs the API and browser tests share."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from accounts.authentication import ROLES
from accounts.tokens import token_create
from approvals.models import ApprovalRequest
from approvals.services import approval_decide
from builder.services import graph_create
from graphs.models import GraphVersion
from runs.models import Run, Step
from runs.services import run_start
from tests.support import engine
from tests.support.leases import begun
from tests.support.specs import chain, edge, graph, node, publish, run_local, transform

# viewer: signed in, no role (the outsider); graph_approver: no group, named as an approver
# on the approval graph; starter: no group, started the World's runs (an operator once).
ROLE_NAMES = ("anonymous", "viewer", "builder", "operator", "approver", "graph_approver", "starter", "admin")
NAME_INPUT = {"type": "object", "properties": {"name": {"type": "string"}}}


def approval_spec(**extra: Any) -> dict[str, Any]:
    """start -> draft -> review (approval gate) -> send -> end, with a reject branch."""
    nodes = [
        node("start", "start"),
        transform("draft", reply="'Hello ' + name"),
        node("review", "approval", config={"prompt": "Send {{ reply }}?"}),
        transform("send", sent="True"),
        transform("discard", sent="False"),
        node("end", "end"),
    ]
    edges = chain("start", "draft", "review") + [
        edge("review", "send", "approved"),
        edge("review", "discard", "rejected"),
        edge("send", "end"),
        edge("discard", "end"),
    ]
    return graph(nodes, edges, input_schema=NAME_INPUT, **extra)


def failing_spec() -> dict[str, Any]:
    """A graph whose second step fails at run time (division by zero)."""
    return graph(
        [node("start", "start"), transform("boom", y="x / zero"), node("end", "end")],
        chain("start", "boom", "end"),
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}, "zero": {"type": "integer"}}},
    )


def linear_spec() -> dict[str, Any]:
    """start -> double (y = x * 2) -> end."""
    return graph(
        [node("start", "start"), transform("double", y="x * 2"), node("end", "end")],
        chain("start", "double", "end"),
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
    )


def client_with_token(user: Any, keys: dict[Any, str] | None = None) -> APIClient:
    """An API client authenticated by a fresh token of ``user`` (None: anonymous); the
    key is kept in ``keys[user]`` when given."""
    client = APIClient()
    if user is not None:
        _, key = token_create(user=user, name="test")
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        if keys is not None:
            keys[user] = key
    return client


@dataclass
class World:
    """Users per role (with clients) and factories for graphs and runs in each state."""

    users: dict[str, Any]
    clients: dict[str, APIClient]
    approval_version: GraphVersion
    keys: dict[Any, str] = field(default_factory=dict)

    def token(self, role: str) -> str:
        """The API key of ``role``'s client."""
        return self.keys[self.users[role]]

    def waiting_run(self) -> Run:
        """A run paused at its approval gate (one pending request)."""
        return run_local(self.approval_version, {"name": "Ada"}, user=self.users["starter"])

    def approval_of(self, run: Run) -> ApprovalRequest:
        return ApprovalRequest.objects.get(run=run, status="pending")

    def queued_run(self) -> Run:
        """A run that exists but has not executed (its start step is pending)."""
        with engine.local_mode():
            return run_start(version=self.approval_version, run_input={"name": "Q"}, user=self.users["starter"])

    def failed_run(self) -> Run:
        run = run_local(failing_spec(), {"x": 1, "zero": 0}, user=self.users["starter"])
        assert run.status == "failed", run.status
        return run

    def succeeded_run(self) -> Run:
        run = run_local(linear_spec(), {"x": 2}, user=self.users["starter"])
        assert run.status == "succeeded", run.error
        return run

    def decided(self, run: Run, decision: str = "approve") -> Run:
        """Decide the run's pending approval as a trusted operator and drive it on."""
        with engine.local_mode() as queue:
            approval_decide(approval_id=self.approval_of(run).pk, decision=decision, actor="tester")
            engine.drive_local(run.pk, queue=queue, timeout=30)
        run.refresh_from_db()
        return run

    def step(self, run: Run, node_id: str) -> Step:
        return Step.objects.get(run=run, node_id=node_id)


def make_users() -> dict[str, Any]:
    """One user per role name: viewer (no group), builder, operator, approver,
    graph_approver and starter (no group; the world names the one on its graph and
    starts its runs as the other), admin (superuser and staff). ``anonymous`` maps to None."""
    User = get_user_model()
    groups = {name: Group.objects.get_or_create(name=name)[0] for name in ROLES}
    users: dict[str, Any] = {"anonymous": None}
    users["viewer"] = User.objects.create_user("viewer", password="pw-viewer")
    for role, group in (("builder", "builders"), ("operator", "operators"), ("approver", "approvers")):
        users[role] = User.objects.create_user(role, password=f"pw-{role}")
        users[role].groups.add(groups[group])
    for role in ("graph_approver", "starter"):
        users[role] = User.objects.create_user(role, password=f"pw-{role}")
    users["admin"] = User.objects.create_superuser("admin", "admin@localhost", "pw-admin")
    return users


@pytest.fixture
def fast_passwords(settings: Any) -> None:
    """PBKDF2 at full strength costs ~0.3 s per user: a module whose tests do not test
    hashing asks for MD5 with ``pytest.mark.usefixtures("fast_passwords")``."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def world(transactional_db: Any, fast_passwords: None) -> World:
    """The :class:`World` in a transactional test database."""
    users = make_users()
    keys: dict[Any, str] = {}
    clients = {name: client_with_token(user, keys) for name, user in users.items()}
    version = publish(approval_spec())
    version.graph.approvers.add(users["graph_approver"])
    return World(users=users, clients=clients, approval_version=version, keys=keys)


def parked_run():
    """A run whose not-safe-to-repeat step 'pay' was interrupted: parked, one recovery request."""
    from runs.nodes.base import NodeResult
    from runs.services import run_start
    from tests.support.specs import chain, effect, graph, node, publish

    version = publish(graph([node("start", "start"), effect("pay", unsafe=True), node("end", "end")], chain("start", "pay", "end")))
    with engine.local_mode():
        run = run_start(version=version, run_input={})
    start = engine.step_claim(Step.objects.get(run=run, node_id="start").pk, "livehost:1:1")
    engine.step_commit(start, NodeResult(), keep_next=False)
    pay = Step.objects.get(run=run, node_id="pay")
    begun(engine.step_claim(pay.pk, "deadhost:1:1"))  # a worker that then died
    Step.objects.filter(pk=pay.pk).update(lease_expires_at="2000-01-01T00:00:00Z")
    with engine.local_mode():
        engine.recover_once()
    assert Step.objects.get(pk=pay.pk).status == "parked"
    return run, ApprovalRequest.objects.get(run=run, purpose="recovery", status="pending")


def priced_spec() -> dict[str, Any]:
    """start -> draft -> boom (fails when zero is 0) -> ask (a priced mock LLM call) -> end."""
    return graph(
        [
            node("start", "start"),
            transform("draft", greeting="'Hi ' + name"),
            transform("boom", y="x / zero"),
            node("ask", "llm", config={"prompt": "Say {{ greeting }}", "model": "mock-1", "max_tokens": 50}),
            node("end", "end"),
        ],
        chain("start", "draft", "boom", "ask", "end"),
        input_schema=XZ,
    )


def failing_draft() -> Any:
    """start -> boom (divides by zero when zero is 0) -> end, as a builder draft."""
    spec = graph(
        [node("start", "start"), transform("boom", y="x / zero"), node("end", "end")],
        chain("start", "boom", "end"),
        input_schema={"type": "object", "properties": {"x": {"type": "integer"}, "zero": {"type": "integer"}}},
    )
    return graph_create(name=spec["name"], draft=spec)


XZ = {"type": "object", "properties": {"x": {"type": "integer"}, "zero": {"type": "integer"}, "name": {"type": "string"}}}
