"""The same graphs in LangGraph (PostgresSaver, durability "sync") and DBOS (steps in a
workflow, PostgreSQL system database), on the same PostgreSQL server as Ballast.

Both come from the optional ``bench`` extra (``pip install -e '.[bench]'``); without it
these cases report a ``skipped`` line instead of failing. Each runs in its own process
(``python -m bench langgraph`` / ``dbos``), which measures its own floor first, like
every benchmark process.

- linear(n): n nodes/steps each returning ``i + 1``; ms per node = run wall time / n.
- fanout(n): n parallel branches each contributing 1 to an ``add``-reduced key, then a
  join; ms per run. LangGraph runs the branches as one superstep on its thread pool;
  DBOS runs them as async steps gathered in one async workflow (its documented way to
  run steps concurrently).
"""
from __future__ import annotations

import time
import uuid
from typing import Any

from bench.core import PG_DB_NAME, Reporter, check, log, pg_url

EXTRA_HINT = "install the bench extra: .venv/bin/pip install -e '.[bench]'"


# --------------------------------------------------------------------------- LangGraph


def case_langgraph(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    if db != "postgres":
        rep.skip("langgraph", "compared on PostgreSQL only (PostgresSaver)")
        return
    try:
        import operator
        from typing import Annotated, TypedDict

        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from langgraph.graph import END, START, StateGraph
        from psycopg.rows import dict_row
    except ImportError as exc:
        rep.skip("langgraph", f"langgraph is not installed ({exc.name}); {EXTRA_HINT}")
        return
    import importlib.metadata as md

    versions = {p: md.version(p) for p in ("langgraph", "langgraph-checkpoint-postgres")}

    # Functional syntax: evaluated here, not as strings in module globals (this module
    # uses postponed annotations and imports typing names locally).
    Linear = TypedDict("Linear", {"i": int})  # noqa: UP013
    Fan = TypedDict("Fan", {"hits": Annotated[int, operator.add], "done": bool})  # noqa: UP013

    def inc(state: dict) -> dict[str, Any]:
        return {"i": state["i"] + 1}

    def branch(state: dict) -> dict[str, Any]:
        return {"hits": 1}

    def join(state: dict) -> dict[str, Any]:
        return {"done": True}

    conn = psycopg.connect(pg_url(), autocommit=True, prepare_threshold=0, row_factory=dict_row)
    try:
        saver = PostgresSaver(conn)
        saver.setup()

        def build_linear(size: int):
            g = StateGraph(Linear)
            prev = START
            for k in range(1, size + 1):
                g.add_node(f"t{k}", inc)
                g.add_edge(prev, f"t{k}")
                prev = f"t{k}"
            g.add_edge(prev, END)
            return g.compile(checkpointer=saver)

        def build_fanout(size: int):
            g = StateGraph(Fan)
            names = [f"b{k}" for k in range(1, size + 1)]
            for name in names:
                g.add_node(name, branch)
                g.add_edge(START, name)
            g.add_node("join", join)
            g.add_edge(names, "join")
            g.add_edge("join", END)
            return g.compile(checkpointer=saver)

        def checkpoints(thread: str) -> int:
            return conn.execute("SELECT count(*) AS c FROM checkpoints WHERE thread_id = %s", (thread,)).fetchone()["c"]

        def invoke(graph, payload, limit: int) -> tuple[dict, str, float]:
            thread = str(uuid.uuid4())
            config = {"configurable": {"thread_id": thread}, "recursion_limit": limit}
            t0 = time.perf_counter()
            out = graph.invoke(payload, config, durability="sync")
            return out, thread, time.perf_counter() - t0

        size = n or 100
        graph = build_linear(size)
        for _ in range(2):
            invoke(graph, {"i": 0}, size + 10)
        samples = []
        for _ in range(runs):
            out, thread, seconds = invoke(graph, {"i": 0}, size + 10)
            check(out["i"] == size, f"langgraph linear: i={out['i']}")
            check(checkpoints(thread) >= size + 1, f"langgraph linear: {checkpoints(thread)} checkpoints")
            samples.append(seconds * 1000 / size)
        rep.emit("langgraph.linear", n=size, runs=runs, samples=samples, unit="ms/node", per_commit=1, versions=versions,
                 note="StateGraph chain, PostgresSaver on one psycopg connection, invoke(durability='sync'); wall time / n")

        for fan in ([n] if n else [10, 100]):
            graph = build_fanout(fan)
            for _ in range(2):
                invoke(graph, {"hits": 0, "done": False}, 10)
            samples = []
            for _ in range(runs):
                out, thread, seconds = invoke(graph, {"hits": 0, "done": False}, 10)
                check(out["hits"] == fan and out["done"], f"langgraph fanout: {out}")
                samples.append(seconds * 1000)
            rep.emit("langgraph.fanout", n=fan, runs=runs, samples=samples, unit="ms/run", per_commit=fan + 2, versions=versions,
                     note="START -> n branches (one superstep) -> join -> END, durability='sync'")
    finally:
        conn.close()


# --------------------------------------------------------------------------- DBOS


def case_dbos(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    if db != "postgres":
        rep.skip("dbos", "compared on PostgreSQL only")
        return
    try:
        from dbos import DBOS, SetWorkflowID
    except ImportError as exc:
        rep.skip("dbos", f"dbos is not installed ({exc.name}); {EXTRA_HINT}")
        return
    import asyncio
    import importlib.metadata as md
    import logging

    import psycopg

    versions = {"dbos": md.version("dbos")}

    @DBOS.step()
    def inc(i: int) -> int:
        return i + 1

    @DBOS.workflow()
    def linear(size: int) -> int:
        i = 0
        for _ in range(size):
            i = inc(i)
        return i

    @DBOS.step()
    async def branch(k: int) -> int:
        return 1

    @DBOS.step()
    async def join(values: list[int]) -> int:
        return sum(values)

    @DBOS.workflow()
    async def fanout(size: int) -> int:
        tasks = [asyncio.create_task(branch(k)) for k in range(size)]
        values = await asyncio.gather(*tasks)
        return await join(list(values))

    sys_url = pg_url().replace("postgres://", "postgresql://", 1)
    DBOS(config={"name": "ballast-bench", "system_database_url": sys_url, "log_level": "WARNING"})
    logging.getLogger("dbos").setLevel(logging.WARNING)
    DBOS.launch()
    loop = asyncio.new_event_loop()
    try:
        with psycopg.connect(pg_url(), autocommit=True) as conn:

            def outputs(wid: str) -> int:
                return conn.execute("SELECT count(*) FROM dbos.operation_outputs WHERE workflow_uuid = %s", (wid,)).fetchone()[0]

            def status(wid: str) -> str:
                return conn.execute("SELECT status FROM dbos.workflow_status WHERE workflow_uuid = %s", (wid,)).fetchone()[0]

            def run_linear(size: int) -> tuple[int, str, float]:
                wid = str(uuid.uuid4())
                t0 = time.perf_counter()
                with SetWorkflowID(wid):
                    out = linear(size)
                return out, wid, time.perf_counter() - t0

            async def _fan(size: int, wid: str) -> int:
                with SetWorkflowID(wid):
                    return await fanout(size)

            def run_fanout(size: int) -> tuple[int, str, float]:
                wid = str(uuid.uuid4())
                t0 = time.perf_counter()
                out = loop.run_until_complete(_fan(size, wid))
                return out, wid, time.perf_counter() - t0

            size = n or 100
            for _ in range(2):
                run_linear(size)
            samples = []
            for _ in range(runs):
                out, wid, seconds = run_linear(size)
                check(out == size, f"dbos linear returned {out}")
                check(outputs(wid) == size and status(wid) == "SUCCESS", f"dbos linear: {outputs(wid)} step outputs, {status(wid)}")
                samples.append(seconds * 1000 / size)
            rep.emit("dbos.linear", n=size, runs=runs, samples=samples, unit="ms/node", per_commit=1, versions=versions,
                     note=f"@DBOS.workflow calling n @DBOS.step in sequence; system database {PG_DB_NAME} (schema dbos); wall time / n")

            for fan in ([n] if n else [10, 100]):
                for _ in range(2):
                    run_fanout(fan)
                samples = []
                for _ in range(runs):
                    out, wid, seconds = run_fanout(fan)
                    check(out == fan, f"dbos fanout returned {out}")
                    check(outputs(wid) == fan + 1 and status(wid) == "SUCCESS", f"dbos fanout: {outputs(wid)} outputs")
                    samples.append(seconds * 1000)
                rep.emit("dbos.fanout", n=fan, runs=runs, samples=samples, unit="ms/run", per_commit=fan + 1, versions=versions,
                         note="async workflow: n async steps started in order and gathered, then a join step")
    finally:
        loop.close()
        DBOS.destroy()
    log("dbos done")
