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
from collections.abc import Callable
from typing import Any

from bench.core import PG_DB_NAME, Reporter, check, log, pg_url

EXTRA_HINT = "install the bench extra: .venv/bin/pip install -e '.[bench]'"


# --------------------------------------------------------------------------- LangGraph


class Unavailable(Exception):
    """A comparator cannot run here (its package is missing, or not on this database)."""


class LangGraphBench:
    """The benchmark graphs in LangGraph on one psycopg connection (PostgresSaver,
    ``durability="sync"``), as callables returning one checked sample each.

    Raises :class:`Unavailable` when langgraph or its PostgreSQL checkpointer is missing.
    Close with :meth:`close` (or use as a context manager)."""

    def __init__(self) -> None:
        try:
            import operator
            from typing import Annotated, TypedDict

            import psycopg
            from langgraph.checkpoint.postgres import PostgresSaver
            from langgraph.graph import END, START, StateGraph
            from psycopg.rows import dict_row
        except ImportError as exc:
            raise Unavailable(f"langgraph is not installed ({exc.name}); {EXTRA_HINT}") from exc
        import importlib.metadata as md

        self.versions = {p: md.version(p) for p in ("langgraph", "langgraph-checkpoint-postgres")}
        # Functional syntax: evaluated here, not as strings in module globals (this module
        # uses postponed annotations and imports typing names locally).
        self._Linear = TypedDict("Linear", {"i": int})  # noqa: UP013
        self._Fan = TypedDict("Fan", {"hits": Annotated[int, operator.add], "done": bool})  # noqa: UP013
        self._StateGraph, self._START, self._END = StateGraph, START, END
        self.conn = psycopg.connect(pg_url(), autocommit=True, prepare_threshold=0, row_factory=dict_row)
        self.saver = PostgresSaver(self.conn)
        self.saver.setup()

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> LangGraphBench:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _checkpoints(self, thread: str) -> int:
        return self.conn.execute("SELECT count(*) AS c FROM checkpoints WHERE thread_id = %s", (thread,)).fetchone()["c"]

    def _invoke(self, graph, payload, limit: int) -> tuple[dict, str, float]:
        thread = str(uuid.uuid4())
        config = {"configurable": {"thread_id": thread}, "recursion_limit": limit}
        t0 = time.perf_counter()
        out = graph.invoke(payload, config, durability="sync")
        return out, thread, time.perf_counter() - t0

    def linear(self, size: int) -> Callable[[], float]:
        """A chain of ``size`` nodes each returning ``i + 1``; a sample is ms per node."""
        g = self._StateGraph(self._Linear)
        prev = self._START
        for k in range(1, size + 1):
            g.add_node(f"t{k}", _lg_inc)
            g.add_edge(prev, f"t{k}")
            prev = f"t{k}"
        g.add_edge(prev, self._END)
        graph = g.compile(checkpointer=self.saver)

        def sample() -> float:
            out, thread, seconds = self._invoke(graph, {"i": 0}, size + 10)
            check(out["i"] == size, f"langgraph linear: i={out['i']}")
            check(self._checkpoints(thread) >= size + 1, f"langgraph linear: {self._checkpoints(thread)} checkpoints")
            return seconds * 1000 / size

        return sample

    def fanout(self, size: int) -> Callable[[], float]:
        """START -> ``size`` branches (one superstep) -> join -> END; a sample is ms per run."""
        g = self._StateGraph(self._Fan)
        names = [f"b{k}" for k in range(1, size + 1)]
        for name in names:
            g.add_node(name, _lg_branch)
            g.add_edge(self._START, name)
        g.add_node("join", _lg_join)
        g.add_edge(names, "join")
        g.add_edge("join", self._END)
        graph = g.compile(checkpointer=self.saver)

        def sample() -> float:
            out, _, seconds = self._invoke(graph, {"hits": 0, "done": False}, 10)
            check(out["hits"] == size and out["done"], f"langgraph fanout: {out}")
            return seconds * 1000

        return sample


def _lg_inc(state: dict) -> dict[str, Any]:
    return {"i": state["i"] + 1}


def _lg_branch(state: dict) -> dict[str, Any]:
    return {"hits": 1}


def _lg_join(state: dict) -> dict[str, Any]:
    return {"done": True}


LANGGRAPH_NOTES = {
    "linear": "StateGraph chain, PostgresSaver on one psycopg connection, invoke(durability='sync'); wall time / n",
    "fanout": "START -> n branches (one superstep) -> join -> END, durability='sync'",
}


def _sequential(sample: Callable[[], float], runs: int, warmup: int = 2) -> list[float]:
    for _ in range(warmup):
        sample()
    return [sample() for _ in range(runs)]


def case_langgraph(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    """LangGraph alone, one graph after the other (the headline interleaves it instead)."""
    if db != "postgres":
        rep.skip("langgraph", "compared on PostgreSQL only (PostgresSaver)")
        return
    try:
        lg = LangGraphBench()
    except Unavailable as exc:
        rep.skip("langgraph", str(exc))
        return
    with lg:
        size = n or 100
        rep.emit("langgraph.linear", n=size, runs=runs, samples=_sequential(lg.linear(size), runs), unit="ms/node",
                 per_commit=1, versions=lg.versions, note=LANGGRAPH_NOTES["linear"])
        for fan in ([n] if n else [10, 100]):
            rep.emit("langgraph.fanout", n=fan, runs=runs, samples=_sequential(lg.fanout(fan), runs), unit="ms/run",
                     per_commit=fan + 2, versions=lg.versions, note=LANGGRAPH_NOTES["fanout"])


# --------------------------------------------------------------------------- DBOS


class DBOSBench:
    """The benchmark graphs as DBOS steps in workflows (system database: the benchmark
    database, schema ``dbos``), as callables returning one checked sample each.

    DBOS allows one launched instance per process: construct once, :meth:`close` at the
    end. Raises :class:`Unavailable` when dbos is missing."""

    def __init__(self) -> None:
        try:
            from dbos import DBOS, SetWorkflowID
        except ImportError as exc:
            raise Unavailable(f"dbos is not installed ({exc.name}); {EXTRA_HINT}") from exc
        import asyncio
        import importlib.metadata as md
        import logging

        import psycopg

        self.versions = {"dbos": md.version("dbos")}
        self._DBOS, self._SetWorkflowID = DBOS, SetWorkflowID

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

        self._linear, self._fanout = linear, fanout
        sys_url = pg_url().replace("postgres://", "postgresql://", 1)
        DBOS(config={"name": "ballast-bench", "system_database_url": sys_url, "log_level": "WARNING"})
        logging.getLogger("dbos").setLevel(logging.WARNING)
        DBOS.launch()
        self.loop = asyncio.new_event_loop()
        self.conn = psycopg.connect(pg_url(), autocommit=True)

    def close(self) -> None:
        self.conn.close()
        self.loop.close()
        self._DBOS.destroy()

    def __enter__(self) -> DBOSBench:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _outputs(self, wid: str) -> int:
        return self.conn.execute("SELECT count(*) FROM dbos.operation_outputs WHERE workflow_uuid = %s", (wid,)).fetchone()[0]

    def _status(self, wid: str) -> str:
        return self.conn.execute("SELECT status FROM dbos.workflow_status WHERE workflow_uuid = %s", (wid,)).fetchone()[0]

    def linear(self, size: int) -> Callable[[], float]:
        """A workflow calling ``size`` steps in sequence; a sample is ms per step."""
        def sample() -> float:
            wid = str(uuid.uuid4())
            t0 = time.perf_counter()
            with self._SetWorkflowID(wid):
                out = self._linear(size)
            seconds = time.perf_counter() - t0
            check(out == size, f"dbos linear returned {out}")
            check(self._outputs(wid) == size and self._status(wid) == "SUCCESS",
                  f"dbos linear: {self._outputs(wid)} step outputs, {self._status(wid)}")
            return seconds * 1000 / size

        return sample

    def fanout(self, size: int) -> Callable[[], float]:
        """An async workflow gathering ``size`` async steps, then a join step; ms per run."""
        async def run(wid: str) -> int:
            with self._SetWorkflowID(wid):
                return await self._fanout(size)

        def sample() -> float:
            wid = str(uuid.uuid4())
            t0 = time.perf_counter()
            out = self.loop.run_until_complete(run(wid))
            seconds = time.perf_counter() - t0
            check(out == size, f"dbos fanout returned {out}")
            check(self._outputs(wid) == size + 1 and self._status(wid) == "SUCCESS", f"dbos fanout: {self._outputs(wid)} outputs")
            return seconds * 1000

        return sample


DBOS_NOTES = {
    "linear": f"@DBOS.workflow calling n @DBOS.step in sequence; system database {PG_DB_NAME} (schema dbos); wall time / n",
    "fanout": "async workflow: n async steps started in order and gathered, then a join step",
}


def case_dbos(rep: Reporter, db: str, n: int | None, runs: int) -> None:
    """DBOS alone, one graph after the other (the headline interleaves it instead)."""
    if db != "postgres":
        rep.skip("dbos", "compared on PostgreSQL only")
        return
    try:
        dbos = DBOSBench()
    except Unavailable as exc:
        rep.skip("dbos", str(exc))
        return
    with dbos:
        size = n or 100
        rep.emit("dbos.linear", n=size, runs=runs, samples=_sequential(dbos.linear(size), runs), unit="ms/node",
                 per_commit=1, versions=dbos.versions, note=DBOS_NOTES["linear"])
        for fan in ([n] if n else [10, 100]):
            rep.emit("dbos.fanout", n=fan, runs=runs, samples=_sequential(dbos.fanout(fan), runs), unit="ms/run",
                     per_commit=fan + 1, versions=dbos.versions, note=DBOS_NOTES["fanout"])
    log("dbos done")
