"""core.tracing without a database: which environments turn traces on, traceparent parsing, and the run's trace context."""
from __future__ import annotations

import pytest

from core import tracing
from tests.support.tracing import recorded_spans

VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.mark.parametrize(
    ("environ", "names"),
    [
        ({}, []),  # the default: off, whatever the SDK's own default exporter is
        ({"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, []),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ["otlp"]),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, ["otlp"]),
        ({"OTEL_TRACES_EXPORTER": "console, OTLP"}, ["console", "otlp"]),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, []),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, []),
    ],
)
def test_only_an_exporter_named_by_the_environment_turns_traces_on(environ, names):
    assert tracing.exporter_names(environ) == names


def test_an_exporter_that_is_not_installed_is_refused_by_name():
    with pytest.raises(ValueError, match="'zipkin_json', which is not installed \\(installed: .*console.*otlp"):
        tracing.configure({"OTEL_TRACES_EXPORTER": "zipkin_json"})
    assert not tracing.enabled()


@pytest.mark.parametrize(
    ("header", "stored"),
    [
        (VALID, VALID),
        (VALID.upper(), VALID),
        (f" {VALID} ", VALID),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        (VALID + "-extra", None),  # version 00 has exactly four fields
        ("ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", None),
        ("00-" + "0" * 32 + "-00f067aa0ba902b7-01", None),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01", None),
        ("00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", None),
        ("", None),
        (None, None),
    ],
)
def test_traceparent_headers_are_checked_as_w3c_trace_context(header, stored):
    assert tracing.parse_traceparent(header) == stored


def test_a_new_trace_per_run_and_the_trace_id_of_a_stored_one():
    first, second = tracing.new_traceparent(), tracing.new_traceparent()
    assert tracing.parse_traceparent(first) == first and first[3:35] != second[3:35]
    assert tracing.trace_id_of(VALID) == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert tracing.trace_id_of("") is None


def test_a_run_started_inside_a_span_joins_its_trace_under_a_run_start_span():
    with recorded_spans() as exporter:
        with tracing.span("outer") as outer:
            assert outer is not None
            inside = tracing.run_traceparent()
        alone = tracing.run_traceparent()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    starts = [s for s in exporter.get_finished_spans() if s.name == "run start"]
    assert len(starts) == 2
    first = next(s for s in starts if s.parent is not None)
    context = first.get_span_context()
    # The run's stored context is its run start span's, a child of the span it began in
    # (flags as the SDK sets them: sampled, and the level-2 random bit).
    assert inside[:52] == f"00-{context.trace_id:032x}-{context.span_id:016x}" and int(inside[53:], 16) & 1
    assert first.parent.span_id == spans["outer"].context.span_id
    assert alone[3:35] != inside[3:35]  # outside any span: a new trace, begun by its own run start span


def test_with_traces_off_the_incoming_traceparent_or_a_new_one():
    assert not tracing.enabled()
    first, second = tracing.run_traceparent(), tracing.run_traceparent()
    assert first[3:35] != second[3:35]


def test_spans_are_nothing_when_traces_are_off():
    assert not tracing.enabled()
    with tracing.span("x", traceparent=VALID, attributes={"a": 1}) as current:
        assert current is None
    tracing.set_attributes(current, {"a": 1})
    tracing.set_error(current, "code", "message")
