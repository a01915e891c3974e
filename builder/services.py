"""Graph writes: create, save drafts (optimistic), publish immutable validated versions, restore, duplicate, delete, import."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from audit.chain import audit
from builder.flow_control import flow_control_set
from builder.graph_calls import call_issues
from builder.graph_checks import INPUT_NAME
from builder.issues import LocatedIssue
from builder.validation import validate_spec
from core.errors import ServiceError
from graphs.models import Graph, GraphVersion
from graphs.spec import GraphSpec, content_hash
from runs.models import Run
from runs.nodes import UnknownNodeKind, get_kind
from runs.nodes.base import ChildCall
from runs.sandbox.expressions import FUNCTION_NAMES
from runs.services import draft_run_start, node_test_run


class GraphInvalid(ServiceError, ValueError):
    """The spec failed validation; ``issues`` holds the structured errors (LocatedIssue
    objects) and ``fields`` the same as API field errors, each message under its issue's
    path from the spec root (``{"nodes[2].config.set.total": [messages]}``; ``spec`` for
    the document as a whole): the path style of every Ballast error."""

    code = "graph_invalid"

    def __init__(self, issues: list[Any]):
        fields: dict[str, list[str]] = {}
        for issue in issues:
            fields.setdefault(getattr(issue, "path", "") or issue.field or "spec", []).append(issue.message)
        super().__init__(
            "; ".join(str(i) for i in issues[:10]),
            message="The graph spec is not valid.",
            fields=fields,
            issues=[i.as_dict() for i in issues],
        )
        self.issues = issues


class DraftConflict(Exception):
    """A draft save named a revision that is no longer the stored one: someone saved
    since. ``graph`` is the graph as stored now (its draft, revision and who saved it);
    nothing was written."""

    def __init__(self, graph: Graph, base_revision: int):
        super().__init__(
            f"The draft was saved by someone else since revision {base_revision} "
            f"(it is now at revision {graph.draft_revision}); nothing was overwritten."
        )
        self.graph = graph
        self.base_revision = base_revision


class GraphHasRuns(Exception):
    """The graph cannot be deleted: ``runs`` runs (``test_runs`` of them node tests) are
    pinned to its versions, and runs outlive the graphs they ran."""

    def __init__(self, graph: Graph, runs: int, test_runs: int):
        tests = f" ({test_runs} of them node tests)" if test_runs else ""
        super().__init__(
            f"Graph {graph.name!r} has {runs} run{'s' if runs != 1 else ''}{tests}; "
            "a graph with runs cannot be deleted (runs keep the version they ran)."
        )
        self.runs = runs
        self.test_runs = test_runs


def _actor(user: Any, actor: str | None) -> str:
    if actor:
        return actor
    return user.get_username() if user is not None else "system"


def _user_or_none(user: Any) -> Any:
    """A saved user for a foreign key (anonymous or None -> None)."""
    return user if getattr(user, "pk", None) is not None else None


def graph_save_draft(*, name: str, spec: dict[str, Any], description: str = "", user: Any = None) -> Graph:
    """Create the graph ``name`` or replace its draft (no revision check: an import
    replaces the draft on purpose). The revision is bumped, so an editor holding the old
    draft gets a conflict instead of overwriting the import. The draft may be invalid."""
    now = timezone.now()
    graph, created = Graph.objects.get_or_create(
        name=name,
        defaults={
            "draft": spec,
            "description": description,
            "created_by": _user_or_none(user),
            "draft_updated_by": _user_or_none(user),
            "draft_updated_at": now,
        },
    )
    if not created:
        fields = {"draft": spec, "draft_revision": F("draft_revision") + 1, "draft_updated_by": _user_or_none(user), "draft_updated_at": now, "updated_at": now}
        if description:
            fields["description"] = description
        Graph.objects.filter(pk=graph.pk).update(**fields)
        graph.refresh_from_db()
    return graph


def graph_draft_save(*, graph: Graph, spec: dict[str, Any], base_revision: int, user: Any = None) -> Graph:
    """Save ``spec`` as the graph's draft if ``base_revision`` is the stored revision
    (compare-and-set on ``draft_revision``); the revision goes up by one and the saver
    and time are recorded. Returns the graph as saved.

    Raises DraftConflict (nothing written) when another save came first. The draft may
    be invalid: validation is for publishing.
    """
    now = timezone.now()
    saved = Graph.objects.filter(pk=graph.pk, draft_revision=base_revision).update(
        draft=spec,
        draft_revision=F("draft_revision") + 1,
        draft_updated_by=_user_or_none(user),
        draft_updated_at=now,
        updated_at=now,
    )
    graph.refresh_from_db()
    if saved != 1:
        raise DraftConflict(graph, base_revision)
    return graph


def graph_publish(*, graph: Graph, user: Any = None, actor: str = "system", message: str = "") -> GraphVersion:
    """Validate the graph's draft and freeze it as a new version with ``message`` (or
    return the existing version with the same content hash, whose message stays).
    Audited. Raises GraphInvalid (nothing saved)."""
    return graph_publish_draft(graph=graph, user=user, actor=actor, message=message)[0]


def graph_publish_draft(*, graph: Graph, user: Any = None, actor: str = "system", message: str = "") -> tuple[GraphVersion, bool]:
    """:func:`graph_publish`, also saying whether this call created the version (False:
    that content was published before, maybe by a concurrent call): the answer comes
    from the insert itself, not from a count read before it, which two racing publishers
    would both pass."""
    result = validate_spec(graph.draft)
    if not result.ok or result.spec is None:  # (ok implies a spec; said for mypy)
        raise GraphInvalid(result.issues)
    _refuse_bad_calls(result.spec, graph_id=graph.pk, user=user)
    return _publish_valid(graph=graph, spec=result.spec.model_dump(mode="json", exclude_none=False), user=user, actor=actor, message=message)


def _refuse_bad_calls(spec: GraphSpec, *, graph_id: int | None, user: Any) -> None:
    """Raise GraphInvalid when ``spec``'s calls to other graphs are refused
    (builder.graph_calls: missing, unpublished, forbidden to ``user``, a cycle)."""
    issues = call_issues(spec, graph_id=graph_id, user=_user_or_none(user))
    if issues:
        raise GraphInvalid(issues)


def _publish_valid(*, graph: Graph, spec: dict[str, Any], user: Any, actor: str, message: str) -> tuple[GraphVersion, bool]:
    """Freeze the validated, normalised ``spec`` as ``graph``'s next version (and True), or
    return the published version with the same content hash (and False). Audited."""
    digest = content_hash(spec)
    published = GraphVersion.objects.filter(graph=graph, is_test=False)
    existing = published.filter(content_hash=digest).first()
    if existing:
        return existing, False
    for _ in range(3):  # two publishers racing for the next number: retry on the unique constraint
        try:
            with transaction.atomic():
                last = published.order_by("-number").values_list("number", flat=True).first() or 0
                version = GraphVersion.objects.create(
                    graph=graph, number=last + 1, spec=spec, content_hash=digest, message=message, created_by=_user_or_none(user)
                )
                audit(actor, "graph.publish", version, actor_type="user" if user else "system", graph=graph.pk, number=version.number, message=message)
                return version, True
        except IntegrityError:
            existing = published.filter(content_hash=digest).first()
            if existing:
                return existing, False
    raise RuntimeError("could not allocate a graph version number")


def graph_version_restore(*, graph: Graph, version: GraphVersion, base_revision: int, user: Any = None, actor: str | None = None) -> Graph:
    """Make ``version``'s spec the graph's new draft, optimistically like any save (the
    revision goes up). Audited. Raises DraftConflict when ``base_revision`` is stale."""
    with transaction.atomic():
        graph = graph_draft_save(graph=graph, spec=copy.deepcopy(version.spec), base_revision=base_revision, user=user)
        audit(_actor(user, actor), "graph.restore", graph, actor_type="user" if user else "system", number=version.number, revision=graph.draft_revision)
    return graph


def draft_has_unpublished_edits(graph: Graph) -> bool:
    """Whether ``graph``'s draft holds work that no published version holds: it differs
    (layout included: notes and positions are part of the content hash) from the latest
    version, or nothing was published and the draft has nodes or notes. An invalid draft
    with content counts as edits. An empty draft (a graph just created) does not."""
    draft = graph.draft
    if not isinstance(draft, dict) or not (draft.get("nodes") or draft.get("notes")):
        return False
    latest = graph.latest_version()
    if latest is None:
        return True
    result = validate_spec(draft)
    if not result.ok or result.spec is None:  # (ok implies a spec; said for mypy)
        return True
    return content_hash(result.spec.model_dump(mode="json", exclude_none=False)) != latest.content_hash


@dataclass(frozen=True)
class ImportResult:
    """What :func:`graph_import` did: ``version`` is the published version holding the
    spec (new, or the existing one with the same content); ``created`` is False when that
    content was published before; ``draft_kept`` is True when the graph's draft had
    unpublished edits and was left as it was (the spec was published without passing
    through the draft)."""

    version: GraphVersion
    draft_kept: bool
    created: bool


def graph_import(*, spec: dict[str, Any], user: Any = None, actor: str = "system") -> ImportResult:
    """Publish ``spec`` as a version of the graph named by ``spec['name']`` (created if
    new). The draft follows the import (replaced, its revision bumped so an open editor
    gets a conflict) unless it holds unpublished edits (:func:`draft_has_unpublished_edits`):
    then the draft is left untouched and the spec is published beside it, because an
    import (the CLI's run_graph, the browser's Import JSON, load_examples at every
    ``make up``) must never throw away someone's unsaved work. Raises GraphInvalid (nothing
    saved) when the spec is invalid."""
    result = validate_spec(spec)
    if not result.ok or result.spec is None:  # (ok implies a spec; said for mypy)
        raise GraphInvalid(result.issues)
    _refuse_bad_calls(result.spec, graph_id=None, user=user)
    normalised = result.spec.model_dump(mode="json", exclude_none=False)
    with transaction.atomic():
        graph = Graph.objects.select_for_update().filter(name=result.spec.name).first()
        if graph is not None and draft_has_unpublished_edits(graph):
            version, created = _publish_valid(graph=graph, spec=normalised, user=user, actor=actor, message="")
            return ImportResult(version=version, draft_kept=True, created=created)
        graph = graph_save_draft(name=result.spec.name, spec=spec, description=result.spec.description, user=user)
        version, created = _publish_valid(graph=graph, spec=normalised, user=user, actor=actor, message="")
        return ImportResult(version=version, draft_kept=False, created=created)


def graph_create(
    *,
    name: str,
    draft: dict[str, Any] | None = None,
    description: str = "",
    approvers: list[Any] | None = None,
    operators: list[Any] | None = None,
    operator_groups: list[Any] | None = None,
    retention_days: int | None = None,
    user: Any = None,
    **flow: Any,
) -> Graph:
    """Create a graph with a draft (which may be invalid; revision 1), named approvers
    (users) and named operators (users, groups), and ``retention_days`` (None: the
    default; runs.retention). Raises IntegrityError when the name is taken (callers check
    first), ValidationError for a retention outside 1..MAX_RETENTION_DAYS or flow control
    (``flow``: builder.flow_control.FIELDS) that does not check."""
    with transaction.atomic():
        _check_retention(retention_days)
        graph = Graph(
            name=name,
            description=description,
            retention_days=retention_days,
            draft=draft or {},
            created_by=_user_or_none(user),
            draft_updated_by=_user_or_none(user),
            draft_updated_at=timezone.now(),
        )
        graph.save(force_insert=True)
        if flow:
            flow_control_set(graph=graph, values=flow, actor=_actor(user, None), actor_type="user" if user else "system")
            graph.save()
        if approvers:
            graph.approvers.set(approvers)
        if operators:
            graph.operators.set(operators)
        if operator_groups:
            graph.operator_groups.set(operator_groups)
    return graph


def graph_duplicate(*, graph: Graph, name: str, user: Any = None, actor: str | None = None) -> Graph:
    """A new graph named ``name`` with a copy of ``graph``'s draft (its ``name`` set to
    the new name), description, approvers and operators; no versions, no runs. Audited on the new
    graph. Raises IntegrityError when the name is taken (callers check first)."""
    draft = copy.deepcopy(graph.draft)
    if isinstance(draft, dict) and "name" in draft:
        draft["name"] = name
    with transaction.atomic():
        new = graph_create(
            name=name,
            draft=draft,
            description=graph.description,
            approvers=list(graph.approvers.all()),
            operators=list(graph.operators.all()),
            operator_groups=list(graph.operator_groups.all()),
            retention_days=graph.retention_days,
            user=user,
        )
        audit(_actor(user, actor), "graph.duplicate", new, actor_type="user" if user else "system", source=graph.pk)
    return new


class Unset:
    """The type of :data:`UNSET`: an argument not given (where None means something)."""


UNSET = Unset()


def _check_retention(days: int | None) -> None:
    """Refuse a retention the model's validators refuse (ValidationError naming
    ``retention_days``): the API's serializer checks first; this keeps every caller honest."""
    if days is None:
        return
    field = Graph._meta.get_field("retention_days")
    try:
        if isinstance(days, bool) or not isinstance(days, int):
            raise ValidationError("Enter a whole number of days.")
        field.run_validators(days)
    except ValidationError as exc:
        raise ValidationError({"retention_days": exc.messages}) from None


def graph_update(
    *,
    graph: Graph,
    name: str | None = None,
    description: str | None = None,
    approvers: list[Any] | None = None,
    operators: list[Any] | None = None,
    operator_groups: list[Any] | None = None,
    retention_days: int | None | Unset = UNSET,
    user: Any = None,
    **flow: Any,
) -> Graph:
    """Change a graph's name, description, approvers or operators (users, groups; None =
    leave as is; a change of operators is audited as ``graph.operators``), or its
    ``retention_days`` (UNSET = leave as is; None = the default; a change is audited as
    ``graph.retention``; ValidationError outside 1..MAX_RETENTION_DAYS), or its flow
    control (``flow``: builder.flow_control.FIELDS, audited as ``graph.flow_control``); the draft
    changes through :func:`graph_draft_save` only. Published versions never change:
    runs stay pinned to what they started on."""
    with transaction.atomic():
        fields = ["updated_at"]
        for attr, value in (("name", name), ("description", description)):
            if value is not None:
                setattr(graph, attr, value)
                fields.append(attr)
        if not isinstance(retention_days, Unset) and retention_days != graph.retention_days:
            _check_retention(retention_days)
            before, graph.retention_days = graph.retention_days, retention_days
            fields.append("retention_days")
            audit(
                _actor(user, None), "graph.retention", graph, actor_type="user" if user else "system",
                retention_days=retention_days, previous=before,
            )  # fmt: skip
        if flow:
            fields += flow_control_set(graph=graph, values=flow, actor=_actor(user, None), actor_type="user" if user else "system")
        graph.save(update_fields=fields)
        if approvers is not None:
            graph.approvers.set(approvers)
        if operators is not None or operator_groups is not None:

            if operators is not None:
                graph.operators.set(operators)
            if operator_groups is not None:
                graph.operator_groups.set(operator_groups)
            audit(
                _actor(user, None), "graph.operators", graph, actor_type="user" if user else "system",
                operators=sorted(u.get_username() for u in graph.operators.all()),
                operator_groups=sorted(g.name for g in graph.operator_groups.all()),
            )  # fmt: skip
    return graph


def graph_delete(*, graph: Graph, user: Any = None, actor: str | None = None) -> None:
    """Delete a graph and its versions (audited). Raises GraphHasRuns when a run (a node
    test run too) is pinned to one of its versions: runs are kept, so is their graph."""
    with transaction.atomic():
        runs = Run.objects.filter(graph_version__graph=graph)
        total = runs.count()
        if total:
            raise GraphHasRuns(graph, total, runs.filter(is_test=True).count())
        audit(_actor(user, actor), "graph.delete", graph, actor_type="user" if user else "system", name=graph.name)
        graph.delete()


# --------------------------------------------------------------------------- test one node


class NodeNotFound(LookupError):
    """The graph's draft has no node with that id."""


class NodeNotTestable(ValueError):
    """The node cannot run alone (it waits for a person, as an approval gate does)."""


class ConfirmationRequired(Exception):
    """Testing the node would do something that is not safe to repeat (send an email, call
    an endpoint that may not de-duplicate): the caller must confirm. ``effects`` names
    them (``tool 'send_email'``)."""

    def __init__(self, node_id: str, effects: list[str]):
        super().__init__(f"Testing node {node_id!r} runs {', '.join(effects)}, which is not safe to repeat; confirm to run it.")
        self.node_id = node_id
        self.effects = effects


TEST_END_ID = "test_end"


def _unsafe_effects(kind: Any, node: Any, config: Any) -> list[str]:
    """What running this configured node would do that is not safe to repeat: the node
    itself (its ``repeat_safe`` override or its kind's rule, e.g. a tool node's tool) and,
    for a node with ``tools`` it may call as child steps (an agent), each such tool."""
    effects = []
    safe = kind.is_step_repeat_safe(config, node.repeat_safe)
    if not safe:
        tool = getattr(config, "tool", None)
        effects.append(f"tool '{tool}'" if isinstance(tool, str) else f"node '{node.id}' ({node.kind})")
    for name in getattr(config, "tools", None) or []:
        if isinstance(name, str) and not kind.is_child_repeat_safe(config, ChildCall("probe", "tool_call", {"tool": name})):
            effects.append(f"tool '{name}'")
    return effects


def _test_snapshot_spec(spec: Any, node: Any, kind: Any, config: Any) -> dict[str, Any]:
    """The one-node graph a test run is pinned to: the node as drafted (tried once: no
    retries), wired from each of its handles to an end node that returns nothing, with
    the draft's state declarations and run settings (budgets apply)."""
    tested = node.model_dump(mode="json")
    tested["retry"] = {**tested.get("retry", {}), "max_attempts": 1}
    nodes = [tested]
    edges: list[dict[str, Any]] = []
    if node.kind != "end":
        end_id = TEST_END_ID if node.id != TEST_END_ID else f"{TEST_END_ID}_"
        nodes.append({"id": end_id, "kind": "end", "config": {"output": []}})
        handles = kind.output_handles(config)
        edges = [{"source": node.id, "target": end_id, "source_handle": h} for h in (handles or [None])]
    return {
        "version": 1,
        "name": spec.name,
        "description": f"test of node {node.id}",
        "input_schema": {"type": "object"},
        "state": {k: v.model_dump(mode="json") for k, v in spec.state.items()},
        "settings": spec.settings.model_dump(mode="json"),
        "nodes": nodes,
        "edges": edges,
    }


def _draft_with_node(draft: Any, node_id: str, node_spec: dict[str, Any]) -> Any:
    """``draft`` with its node ``node_id`` replaced by ``node_spec`` (appended when the
    draft has no such node yet: one added in the editor since the last save). Raises
    GraphInvalid when ``node_spec`` names another id. The stored draft is not changed."""
    if node_spec.get("id", node_id) != node_id:
        raise GraphInvalid([LocatedIssue(node_id, "id", f"the node sent is {node_spec.get('id')!r}, not {node_id!r}", "invalid", "node.id")])
    out = copy.deepcopy(draft) if isinstance(draft, dict) else {}
    nodes = [n for n in out.get("nodes") or [] if isinstance(n, dict)] if isinstance(out.get("nodes"), list) else []
    sent = {**node_spec, "id": node_id}
    index = next((i for i, n in enumerate(nodes) if n.get("id") == node_id), None)
    if index is None:
        nodes.append(sent)
    else:
        nodes[index] = sent
    out["nodes"] = nodes
    return out


def graph_node_test(
    *,
    graph: Graph,
    node_id: str,
    state: dict[str, Any],
    node_spec: dict[str, Any] | None = None,
    confirm: bool = False,
    user: Any = None,
    actor: str | None = None,
) -> Any:
    """Run node ``node_id`` of the graph's draft once with ``state`` (a JSON object; its
    ``input`` key, when an object, is the run input) through its real node kind and
    provider, recorded as a test run (``runs.services.node_test_run``). Returns the
    finished Run (``is_test``).

    ``node_spec`` (the node as the editor holds it) is tested instead of the saved one, so
    the user tests what they see before the draft is saved; it is checked exactly as the
    saved node would be, in the draft's context (its names and state). The stored draft
    does not change.

    Checked first, before any token is spent: the draft parses, the node exists, its
    kind and config are valid and its kind's own checks pass with the draft's names and
    the keys of ``state`` known. Raises NodeNotFound, GraphInvalid (the issues),
    NodeNotTestable (a node that waits for a person), ConfirmationRequired (the node
    may do something not safe to repeat and ``confirm`` is false), StateWriteRefused
    (nothing recorded: ``unknown_state_key`` for a key of ``state`` the draft does not
    know, ``invalid`` for a ``state.input`` that is not an object, ``invalid_output`` /
    ``state_too_large`` for values the state cannot hold).
    """
    from pydantic import ValidationError

    draft = graph.draft if node_spec is None else _draft_with_node(graph.draft, node_id, node_spec)
    try:
        spec = GraphSpec.model_validate(draft)
    except ValidationError:
        raise GraphInvalid(validate_spec(draft).issues) from None
    index = next((i for i, n in enumerate(spec.nodes) if n.id == node_id), None)
    if index is None:
        raise NodeNotFound(node_id)
    node = spec.nodes[index]
    try:
        kind = get_kind(node.kind)
    except UnknownNodeKind:
        raise GraphInvalid([LocatedIssue(node.id, "kind", f"unknown node kind '{node.kind}'", "unknown_kind", f"nodes[{index}].kind")]) from None
    result = validate_spec(spec)
    config = result.configs.get(node.id)
    if config is None:
        raise GraphInvalid([i for i in result.issues if i.node_id == node.id])
    # The draft's state keys (declared, input properties, what its nodes write): the keys
    # the given state may set (and ``input``, the run input), and the names the kind sees.
    graph_keys = set(spec.input_names()) | set(spec.state)
    for other_id, other_config in result.configs.items():
        graph_keys |= set(get_kind(spec.node(other_id).kind).writes(other_config))
    graph_keys.discard(INPUT_NAME)
    known = graph_keys | set(state) | {INPUT_NAME, *FUNCTION_NAMES}
    issues = kind.check(node.id, config, known)
    if issues:
        raise GraphInvalid([LocatedIssue(i.node_id, i.field, i.message, i.code, f"nodes[{index}].{i.field}") for i in issues])
    if kind.waits(config):
        what = "for its child run" if node.kind == "subgraph" else "for its graph tools' child runs" if node.kind == "agent" else "for a person"
        raise NodeNotTestable(f"node {node.id!r} ({node.kind}) waits {what}; it cannot be tested on its own: run the draft instead")
    effects = _unsafe_effects(kind, node, config)
    if effects and not confirm:
        raise ConfirmationRequired(node.id, effects)

    version = _test_snapshot(graph, _test_snapshot_spec(spec, node, kind, config), user)
    return node_test_run(version=version, node_id=node.id, state=state, user=user, actor=actor, known_keys=frozenset(graph_keys))


def _test_snapshot(graph: Graph, spec: dict[str, Any], user: Any) -> GraphVersion:
    """The hidden test snapshot (``is_test``, number 0) of ``graph`` holding ``spec``,
    created unless one with the same content exists: snapshots are keyed by content, so
    testing a node or running a draft again unchanged reuses one row."""
    digest = content_hash(spec)
    with transaction.atomic():
        GraphVersion.objects.bulk_create(
            [GraphVersion(graph=graph, number=0, spec=spec, content_hash=digest, is_test=True, created_by=_user_or_none(user))],
            ignore_conflicts=True,
        )
        return GraphVersion.objects.get(graph=graph, is_test=True, content_hash=digest)


def graph_draft_run(*, graph: Graph, run_input: dict[str, Any] | None = None, user: Any = None, actor: str | None = None) -> Run:
    """Run the graph's current draft as it is saved, without publishing it: the draft is
    validated as a publish would validate it, frozen as a hidden test snapshot (``is_test``,
    number 0; one per distinct content, reused when the same draft runs again) and run from
    its start node with ``run_input`` (a JSON object; default ``{}``) through the queue, as a
    test run (``runs.services.draft_run_start``). Returns the new Run (queued).

    Raises GraphInvalid (the draft's issues; nothing saved, nothing started) and
    RunInputInvalid (the input does not match the draft's input schema; the snapshot may
    remain, unused, for the retention job)."""
    result = validate_spec(graph.draft)
    if not result.ok or result.spec is None:  # (ok implies a spec; said for mypy)
        raise GraphInvalid(result.issues)
    _refuse_bad_calls(result.spec, graph_id=graph.pk, user=user)
    version = _test_snapshot(graph, result.spec.model_dump(mode="json", exclude_none=False), user)
    return draft_run_start(version=version, run_input=run_input, user=user, actor=actor)
