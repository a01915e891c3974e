"""Schemathesis against the OpenAPI schema, in-process through the WSGI app: no 500s, and
every response matches the schema (status code, content type, headers, body).

Bounded: each operation gets ``MAX_EXAMPLES`` positive and as many negative (schema-
violating) requests, half of them aimed at objects that exist (seeded graph, versions,
runs in each status, steps, approvals) so the 2xx paths are exercised, not just 404s.
The whole module takes about two minutes of one worker per database.

Not checked: schemathesis' ``negative_data_rejection`` and ``positive_data_acceptance``.
The API deliberately treats an empty query parameter as absent and an unusable page size
as the default (DRF's conventions), and answers semantic refusals (a graph that does not
validate, a run in the wrong status) with 400/409: those are choices, not schema breaks.
"""
from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from runs.engine import api as engine
from tests.support.world import World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]

# Per strategy (positive and negative, each with and without the seeded ids): 16 requests an
# operation. 8 (32 requests) cost the suite 240 s of a worker on SQLite and 330 s on
# PostgreSQL (a fifth of that pass), about 25 ms a request; derandomized, so every run asks
# the same requests.
MAX_EXAMPLES = 4
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance, response_schema_conformance]

RAW_SCHEMA = SchemaGenerator().get_schema(request=None, public=True)
SCHEMA = schemathesis.openapi.from_dict(RAW_SCHEMA)
SCHEMA.app = get_wsgi_application()  # in-process: requests go straight to Django's WSGI handler
OPERATIONS = {result.ok().label: result.ok() for result in SCHEMA.get_all_operations()}


def test_the_schema_is_served_and_documents_every_api_route(world: World) -> None:
    served = world.clients["viewer"].get("/api/schema/?format=json")
    assert served.status_code == 200
    assert served.json()["paths"].keys() == RAW_SCHEMA["paths"].keys()
    # + runs_summary, runs_cancel_bulk, steps_state, runs_graph; + 7 webhook management operations;
    # + 3 webhook listen operations, graph_publish_check; + 12 of administration (tokens, users,
    # groups, the principal search); + 6 of MCP servers (list, create, read, update, delete, test); + 9 schedule operations; + graph_draft_run;
    # + 8 of completion callbacks (list, create, read, update, delete, rotate, deliveries, redeliver);
    # + 3 of the builder's test data (pin, unpin, the expression/template preview); + approvals_of_run
    assert len(OPERATIONS) == 115


def seeded_ids(world: World) -> dict[str, Any]:
    """Path parameter values that name existing objects."""
    version = world.approval_version
    run = world.waiting_run()
    return {
        "graph_id": version.graph_id,
        "number": 1,
        "run_id": run.pk,
        "step_id": world.step(run, "draft").pk,
        "approval_id": world.approval_of(world.waiting_run()).pk,
        "name": _stored_provider(),  # and an MCP server of that name (_stored_mcp_server)
        "node_id": "draft",
        # The viewer's: revoking the admin's own would end the test's authentication.
        "token_id": _viewer_token(world),
        "user_id": world.users["viewer"].pk,
        "group_id": _group(),
    }


def _viewer_token(world: World) -> int:
    from accounts.tokens import token_create

    return token_create(user=world.users["viewer"], name="seeded")[0].pk


def _group() -> int:
    from django.contrib.auth.models import Group

    return Group.objects.get_or_create(name="seeded")[0].pk


def _stored_mcp_server() -> str:
    """An MCP server added in the app, named as the seeded provider (the routes share the
    ``name`` parameter): a loopback URL the outbound guard refuses, so a test of it fails fast."""
    from runs.tools.mcp_servers.services import mcp_server_create

    return mcp_server_create(data={"name": "seeded", "transport": "http", "url": "http://127.0.0.1:9/mcp"}, refresh=False).name


def _stored_provider() -> str:
    """A provider added in the app (nothing listens at its URL: a test of it fails fast)."""
    from runs.providers.services import provider_credential_create

    data = {"name": "seeded", "kind": "openai_compatible", "base_url": "http://127.0.0.1:9/v1", "default_model": "local-7b"}
    return provider_credential_create(data=data).name


@pytest.mark.parametrize("label", sorted(OPERATIONS))
def test_api_conforms_to_its_schema(world: World, label: str, settings: Any) -> None:
    operation = OPERATIONS[label]
    # A generated MCP server URL may name a host that resolves and never answers.
    settings.BALLAST_MCP_CONNECT_TIMEOUT = settings.BALLAST_MCP_CALL_TIMEOUT = 2.0
    world.failed_run()
    world.succeeded_run()
    ids = seeded_ids(world)
    _stored_mcp_server()
    existing = {p.name: ids[p.name] for p in operation.path_parameters if p.name in ids}
    headers = {"Authorization": f"Token {world.token('admin')}"}
    strategies = []
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        strategies.append(operation.as_strategy(generation_mode=mode))
        if existing:
            strategies.append(operation.as_strategy(generation_mode=mode, path_parameters=existing))

    @hsettings(
        max_examples=MAX_EXAMPLES * len(strategies),
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=st.one_of(*strategies))
    def check(case: Any) -> None:
        with engine.local_mode():  # started runs stay rows; nothing goes to django-q
            case.call_and_validate(headers=headers, checks=CHECKS)

    check()
