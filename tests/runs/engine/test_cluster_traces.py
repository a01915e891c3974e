"""A fan-out run across two worker processes of a real qcluster: every step is a span of the run's one trace, exported over OTLP/HTTP (the SDK's exporter) to a receiver this test runs; every attempt records the cluster's BALLAST_BUILD; its JSON log lines name the step they were logged in."""
from __future__ import annotations

import json

import pytest

from runs.engine.cluster import WORKER_READY
from runs.models import AttemptStatus, Step, StepAttempt
from runs.services import run_start
from tests.support.cluster import wait_for_status, wait_until
from tests.support.specs import chain, edge, graph, node, publish
from tests.support.tracing import OtlpReceiver

pytestmark = [pytest.mark.process, pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

RELEASE = "cluster-traces-build-7"


def test_a_fan_out_across_two_worker_processes_is_one_trace(cluster_factory, tmp_path) -> None:
    release = tmp_path / "release"
    branches = ["b1", "b2"]
    spec = graph(
        [
            node("start", "start"),
            # Each branch holds its worker until the test lets go: with two worker processes
            # of one step thread each, the two branches run at once, one in each.
            *[node(b, "tool", config={"tool": "held_effect", "args": {"label": b, "release": str(release)}}) for b in branches],
            node("join", "join"),
            node("end", "end"),
        ],
        [edge("start", b) for b in branches] + [edge(b, "join") for b in branches] + [edge("join", "end")],
    )
    with OtlpReceiver() as receiver:
        cluster = cluster_factory(
            "t", workers=2,
            extra_env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                "OTEL_SERVICE_NAME": "ballast-worker",
                # Export each batch within 100 ms: a forked worker exits without flushing.
                "OTEL_BSP_SCHEDULE_DELAY": "100",
                "BALLAST_BUILD": RELEASE,
                "BALLAST_LOG_FORMAT": "json",
                "BALLAST_EXTRA_NODE_KINDS": "emit=tests.support.kinds.EmitNode",
                "BALLAST_WORKER_STEP_THREADS": "1",
            },
        ).start()
        cluster.wait_ready()
        run = run_start(version=publish(spec), run_input={})

        def both_branches_running() -> bool:
            held = StepAttempt.objects.filter(step__run=run, step__node_id__in=branches, status=AttemptStatus.RUNNING)
            return len(set(held.values_list("worker", flat=True))) == 2

        wait_until(both_branches_running, 90, "both branches running, one in each worker process", clusters=[cluster], run_id=run.pk)
        release.write_text("go")
        run = wait_for_status(run, "succeeded", timeout=90, clusters=[cluster])
        steps = dict(Step.objects.filter(run=run).values_list("node_id", "pk"))
        trace_id, parent = run.traceparent[3:35], run.traceparent[36:52]

        def step_spans() -> list[dict]:
            return [s for s in receiver.snapshot() if s["name"].startswith("step ")]

        wait_until(lambda: len(step_spans()) >= len(steps), 60, "a span for every step", clusters=[cluster], run_id=run.pk)
        spans = step_spans()
        assert sorted(s["attributes"]["ballast.step.id"] for s in spans) == sorted(steps.values())
        assert {s["trace_id"] for s in spans} == {trace_id}  # one trace: the run's
        assert {s["parent_span_id"] for s in spans} == {parent}  # each a child of the run's stored context
        assert len({s["attributes"]["ballast.worker"] for s in spans}) == 2  # from both worker processes
        assert {s["resource"]["service.name"] for s in spans} == {"ballast-worker"}
        assert {s["resource"]["service.version"] for s in spans} == {s["attributes"]["ballast.build"] for s in spans} == {RELEASE}
        tool_spans = [s for s in receiver.snapshot() if s["name"] == "execute_tool held_effect"]
        step_span_ids = {s["attributes"]["ballast.node.id"]: s["span_id"] for s in spans}
        assert sorted(s["parent_span_id"] for s in tool_spans) == sorted(step_span_ids[b] for b in branches)
        assert set(StepAttempt.objects.filter(step__run=run).values_list("build", flat=True)) == {RELEASE}

        # A step whose result is not JSON: the engine's warning, logged while the step was in
        # hand, names it in the cluster's JSON log lines.
        bad = run_start(version=publish(graph([node("start", "start"), node("bad", "emit", config={"value": "nan"}), node("end", "end")],
                                              chain("start", "bad", "end"), name="bad-output")), run_input={})
        bad = wait_for_status(bad, "failed", timeout=90, clusters=[cluster])
        bad_step = Step.objects.get(run=bad, node_id="bad")
        attempt = StepAttempt.objects.get(step=bad_step)

        def json_lines() -> list[dict]:
            text = cluster.log_path.read_text(errors="replace")
            return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

        wait_until(lambda: any("result is not JSON" in e["message"] for e in json_lines()), 30, "the engine's warning logged", clusters=[cluster])
        lines = json_lines()
        [warning] = [e for e in lines if "result is not JSON" in e["message"]]
        assert (warning["run_id"], warning["step_id"], warning["attempt"], warning["worker"]) == (bad.pk, bad_step.pk, 1, attempt.worker)
        assert warning["trace_id"] == bad.traceparent[3:35] and warning["build"] == RELEASE
        assert all(e["build"] == RELEASE and {"time", "level", "logger", "message"} <= set(e) for e in lines)
        # A worker process's lines outside any step name the worker too (its start-up claim).
        ready = [e for e in lines if e["message"].startswith(f"{WORKER_READY}: worker ")]
        assert len(ready) == 2 and all(e["worker"] == e["message"].split()[3] and e["step_id"] is None for e in ready)


def test_a_stopping_worker_exports_the_spans_it_still_holds(cluster_factory) -> None:
    """A worker process ends by os._exit (multiprocessing), past the SDK's atexit flush:
    with a batch delay far longer than the test, its spans arrive only because its exit
    flushes them (core.tracing.configure)."""
    with OtlpReceiver() as receiver:
        cluster = cluster_factory(
            "f", workers=1,
            extra_env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "600000"},
        ).start()
        cluster.wait_ready()
        run = run_start(version=publish(graph([node("start", "start"), node("end", "end")], chain("start", "end"), name="flushed")), run_input={})
        wait_for_status(run, "succeeded", timeout=90, clusters=[cluster])
        assert not [s for s in receiver.snapshot() if s["name"].startswith("step ")]  # still held in the worker's batch
        cluster.stop()
        wait_until(lambda: len([s for s in receiver.snapshot() if s["name"].startswith("step ")]) == 2, 30, "the held spans exported at exit")
        assert {s["trace_id"] for s in receiver.snapshot()} == {run.traceparent[3:35]}
