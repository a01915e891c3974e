"""A lost database connection just before a step not safe to repeat begins (issue 23 item 2).

Such a step first commits that its attempt is about to act (claims.mark_effect_begun, one
fenced UPDATE). The 1,000-run chaos run of 2026-12-07 lost that UPDATE's connection to a
database blip: the node "raised", the step failed with nothing sent and was parked for a
person, with no process dead. The mark is ridden out like a commit: reconnect, same fence.
"""
from __future__ import annotations

import pytest
from django.db import connection

from runs.engine import loop as engine_loop
from runs.models import Step
from runs.services import run_start
from runs.vocabulary import NodeError
from tests.support import engine
from tests.support.specs import chain, effect, graph, node, publish
from tests.support.tools import read_effects

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="pg_terminate_backend: SQLite has no connection to lose"),
]
W = "host:1:1"


def _terminate_own_backend() -> None:
    import psycopg

    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_lost_connection_before_an_unsafe_step_begins_is_ridden_out(effects_file):
    version = publish(graph([node("start", "start"), effect("send", unsafe=True), node("end", "end")], chain("start", "send", "end")))
    with engine.local_mode():
        run = run_start(version=version, run_input={})
    start = Step.objects.get(run=run, node_id="start")
    send = engine_loop.run_claimed(engine.step_claim(start.pk, W))  # the start commits; send is leased to us
    assert send is not None and send.node_id == "send"
    _terminate_own_backend()
    result = engine.execute_node(send)
    assert not isinstance(result, NodeError), result
    assert Step.objects.get(pk=send.step_id).effect_attempt == send.attempt
    assert [e["label"] for e in read_effects(str(effects_file))] == ["send"]
