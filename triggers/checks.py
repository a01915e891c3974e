"""The trigger checks run at each publish: which enabled webhooks and active schedules following the latest version the new input schema breaks."""
from __future__ import annotations

from typing import Any

from builder.publish_checks import PublishWarning
from graphs.models import GraphVersion
from triggers.models import Schedule, WebhookTrigger


def _schema(version: GraphVersion | None) -> tuple[dict[str, Any] | None, set[str]]:
    """(declared properties or None when the schema declares none, required names)."""
    schema = (version.spec.get("input_schema") if version is not None else None) or {}
    if not isinstance(schema, dict):
        return None, set()
    props = schema.get("properties")
    required = schema.get("required")
    return (props if isinstance(props, dict) and props else None), {r for r in required or [] if isinstance(r, str)}


def trigger_input_problems(trigger: WebhookTrigger, version: GraphVersion, previous: GraphVersion | None) -> dict[str, list[str]]:
    """What in ``version``'s input schema a delivery to ``trigger`` can no longer satisfy
    ({} when nothing), field -> messages:

    - with an input mapping: a mapped field the schema does not declare (when it declares
      properties at all) and a required field the mapping does not name;
    - with no mapping (the body is the input): a field ``version`` requires that
      ``previous`` (the version deliveries ran until now) did not: bodies valid until now
      need not carry it.
    """
    props, required = _schema(version)
    problems: dict[str, list[str]] = {}
    mapping = trigger.input_mapping or {}
    if mapping:
        for name in mapping:
            if props is not None and name not in props:
                problems[f"input_mapping.{name}"] = [f"Maps to {name!r}, which the input schema of version {version.number} no longer has."]
        for name in sorted(required - set(mapping)):
            problems[f"input_mapping.{name}"] = [f"Version {version.number} requires {name!r}, which the mapping does not provide."]
    else:
        _, before = _schema(previous)
        for name in sorted(required - before):
            since = f"version {previous.number}" if previous is not None else "the bodies sent so far"
            problems[f"input.{name}"] = [f"Version {version.number} requires {name!r}, which {since} did not: deliveries need not carry it."]
    return problems


def webhook_publish_warnings(version: GraphVersion, previous: GraphVersion | None) -> list[PublishWarning]:
    """A ``trigger_input`` warning per enabled webhook of the graph that follows the latest
    published version (no pinned version) and whose deliveries ``version`` breaks."""
    out = []
    for trigger in WebhookTrigger.objects.filter(graph_id=version.graph_id, enabled=True, version__isnull=True).order_by("name"):
        problems = trigger_input_problems(trigger, version, previous)
        if problems:
            first = next(iter(problems.values()))[0]
            out.append(PublishWarning(
                code="trigger_input",
                message=f"Webhook {trigger.name!r} follows the latest version, and version {version.number} breaks its input: {first}",
                subject={"kind": "webhook", "id": trigger.pk, "name": trigger.name},
                fields=problems,
            ))
    return out


def schedule_publish_warnings(version: GraphVersion, previous: GraphVersion | None) -> list[PublishWarning]:
    """A ``trigger_input`` warning per active (not paused) schedule of the graph that
    follows the latest published version and whose input ``version``'s input schema refuses
    (its ticks would fail to start), naming the fields."""
    # Here, not at module level: triggers.schedules imports the engine's API, which the
    # webhook check does not need.
    from triggers.schedules import input_problems

    out = []
    for schedule in Schedule.objects.filter(graph_id=version.graph_id, paused=False, version__isnull=True).order_by("name"):
        problems = input_problems(version, schedule.input)
        if problems:
            field, messages = next(iter(problems.items()))
            out.append(PublishWarning(
                code="trigger_input",
                message=f"Schedule {schedule.name!r} follows the latest version, and version {version.number} refuses its input: {field}: {messages[0]}",
                subject={"kind": "schedule", "id": schedule.pk, "name": schedule.name},
                fields=problems,
            ))
    return out
