"""Graph writes: create or update a draft, publish an immutable validated version."""
from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from builder.models import Graph, GraphVersion
from builder.spec import content_hash


class GraphInvalid(ValueError):
    """The spec failed validation; ``issues`` holds the structured errors (Issue objects)
    and ``fields`` the same as API field errors (``{"nodes[2].config.x": [messages]}``,
    see ``ValidationResult.field_errors``)."""

    def __init__(self, issues: list[Any], fields: dict[str, list[str]] | None = None):
        super().__init__("; ".join(str(i) for i in issues[:10]))
        self.issues = issues
        self.fields = fields or {}


def graph_save_draft(*, name: str, spec: dict[str, Any], description: str = "", user: Any = None) -> Graph:
    """Create the graph ``name`` or replace its draft. The draft may be invalid."""
    graph, created = Graph.objects.get_or_create(name=name, defaults={"draft": spec, "description": description, "created_by": user})
    if not created:
        graph.draft = spec
        if description:
            graph.description = description
        graph.save(update_fields=["draft", "description", "updated_at"])
    return graph


def graph_publish(*, graph: Graph, user: Any = None, actor: str = "system") -> GraphVersion:
    """Validate the graph's draft and freeze it as a new version (or return the existing
    version with the same content hash). Audited. Raises GraphInvalid."""
    from builder.validation import validate_spec
    from runs.engine.audit import audit

    result = validate_spec(graph.draft)
    if not result.ok:
        raise GraphInvalid(result.issues, result.field_errors())
    spec = result.spec.model_dump(mode="json", exclude_none=False)
    digest = content_hash(spec)
    existing = GraphVersion.objects.filter(graph=graph, content_hash=digest).first()
    if existing:
        return existing
    for _ in range(3):  # two publishers racing for the next number: retry on the unique constraint
        try:
            with transaction.atomic():
                last = GraphVersion.objects.filter(graph=graph).order_by("-number").values_list("number", flat=True).first() or 0
                version = GraphVersion.objects.create(graph=graph, number=last + 1, spec=spec, content_hash=digest, created_by=user)
                audit(actor, "graph.publish", version, actor_type="user" if user else "system", graph=graph.pk, number=version.number)
                return version
        except IntegrityError:
            existing = GraphVersion.objects.filter(graph=graph, content_hash=digest).first()
            if existing:
                return existing
    raise RuntimeError("could not allocate a graph version number")


def graph_import(*, spec: dict[str, Any], user: Any = None, actor: str = "system") -> GraphVersion:
    """Save ``spec`` as the draft of the graph named by ``spec['name']`` and publish it.
    Raises GraphInvalid (before anything is saved when the spec is invalid)."""
    from builder.validation import validate_spec

    result = validate_spec(spec)
    if not result.ok:
        raise GraphInvalid(result.issues, result.field_errors())
    graph = graph_save_draft(name=result.spec.name, spec=spec, description=result.spec.description, user=user)
    return graph_publish(graph=graph, user=user, actor=actor)


def graph_create(*, name: str, draft: dict[str, Any] | None = None, description: str = "", approvers: list[Any] | None = None, user: Any = None) -> Graph:
    """Create a graph with a draft (which may be invalid) and named approvers (users).
    Raises IntegrityError when the name is taken (callers check first)."""
    with transaction.atomic():
        graph = Graph.objects.create(name=name, description=description, draft=draft or {}, created_by=user)
        if approvers:
            graph.approvers.set(approvers)
    return graph


def graph_update(
    *,
    graph: Graph,
    name: str | None = None,
    draft: dict[str, Any] | None = None,
    description: str | None = None,
    approvers: list[Any] | None = None,
    user: Any = None,
) -> Graph:
    """Change a graph's draft, name, description or approvers (None = leave as is).
    Published versions never change: runs stay pinned to what they started on."""
    with transaction.atomic():
        fields = ["updated_at"]
        for attr, value in (("name", name), ("draft", draft), ("description", description)):
            if value is not None:
                setattr(graph, attr, value)
                fields.append(attr)
        graph.save(update_fields=fields)
        if approvers is not None:
            graph.approvers.set(approvers)
    return graph


def graph_delete(*, graph: Graph, user: Any = None) -> None:
    """Delete a graph and its versions. Raises django.db.models.ProtectedError when a run
    is pinned to one of its versions (runs outlive edits; they are not deleted with it)."""
    graph.delete()
