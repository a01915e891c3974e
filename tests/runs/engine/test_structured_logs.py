"""Structured logs in one process: an engine line logged while a step runs carries the run, step, attempt, worker, trace id and build as JSON fields (the handler, filter and formatter LOGGING configures for BALLAST_LOG_FORMAT=json)."""
from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from django.conf import settings

from core.build import build
from core.log_context import StepFields
from runs.models import Step, StepAttempt
from tests.support.specs import chain, graph, node, run_local

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """The "ballast" logger's records as BALLAST_LOG_FORMAT=json writes them (the json
    formatter and the step-fields filter of settings.LOGGING), into the yielded buffer."""
    spec = dict(settings.LOGGING["formatters"]["json"])
    factory = spec.pop("()")
    module, name = factory.rsplit(".", 1)
    formatter = getattr(__import__(module, fromlist=[name]), name)(**spec)
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(formatter)
    handler.addFilter(StepFields())
    logger = logging.getLogger("ballast")
    logger.addHandler(handler)
    try:
        yield buffer
    finally:
        logger.removeHandler(handler)


def test_an_engine_line_logged_in_a_step_names_the_step_and_one_outside_names_only_the_build(json_lines):
    spec = graph([node("start", "start"), node("bad", "emit", config={"value": "nan"}), node("end", "end")], chain("start", "bad", "end"))
    run = run_local(spec, {})
    assert run.status == "failed"
    logging.getLogger("ballast.engine").warning("between steps")
    lines = [json.loads(line) for line in json_lines.getvalue().splitlines()]
    bad = Step.objects.get(run=run, node_id="bad")
    attempt = StepAttempt.objects.get(step=bad)
    [line] = [entry for entry in lines if "result is not JSON" in entry["message"]]
    assert line["logger"] == "ballast.engine" and line["level"] == "WARNING" and line["time"].endswith("+00:00")
    assert (line["run_id"], line["step_id"], line["attempt"], line["worker"]) == (run.pk, bad.pk, 1, attempt.worker)
    assert line["trace_id"] == run.traceparent[3:35] and line["build"] == attempt.build == build()
    outside = lines[-1]
    assert outside["message"] == "between steps" and outside["build"] == build()
    assert outside["run_id"] is None and outside["step_id"] is None and outside["trace_id"] is None
