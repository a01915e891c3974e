"""Graph API views: drafts (optimistic saves), versions (publish, list, read, diff, restore),
duplicate, validate, import, export, test one node, run the draft, pin test data, preview a value; and the builder's catalogues (node
kinds, tools, models) and the expression checker.

Reads (and the pure checks) are open to every authenticated user; writes, testing a
node and running the draft need the ``builders`` role. Views validate input, call a service or selector, and
serialise the result.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import IntegrityError, transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response

from accounts.authentication import IsBuilder
from builder import pins, publish_checks, selectors, services
from builder.preview import preview_source
from builder.serializers import (
    DraftOutput,
    DraftRunInput,
    DuplicateInput,
    ExportQueryInput,
    ExpressionCheckInput,
    ExpressionCheckOutput,
    GraphCreateInput,
    GraphDetailOutput,
    GraphListOutput,
    GraphUpdateInput,
    ImportOutput,
    ModelsOutput,
    NodeKindsOutput,
    NodeTestInput,
    NodeTestOutput,
    PinInput,
    PinsOutput,
    PreviewInput,
    PreviewOutput,
    PublishCheckOutput,
    PublishInput,
    PublishOutput,
    RestoreInput,
    ToolsOutput,
    ValidationOutput,
    VersionDetailOutput,
    VersionDiffInput,
    VersionDiffOutput,
    VersionListOutput,
)
from builder.validation import check_source, validation_report
from core.api import ERROR_BODY, PAGE_PARAMETERS, ApiError, ApiView, bad_request, conflict, paginated
from graphs.models import Graph
from runs import selectors as run_selectors
from runs.api.serializer_fields import has_nul
from runs.api.serializers import RunDetailOutput
from runs.models import Step

TAG = ["graphs"]
NAME_TAKEN = OpenApiResponse(ERROR_BODY, description="Another graph has this name.")
DRAFT_CONFLICT = OpenApiResponse(
    inline_serializer(
        name="DraftConflictBody",
        fields={
            "error": inline_serializer(
                name="DraftConflictError",
                fields={
                    "code": serializers.CharField(),
                    "message": serializers.CharField(),
                    "fields": serializers.DictField(child=serializers.ListField(child=serializers.CharField())),
                },
            ),
            "current": DraftOutput(),
        },
    ),
    description="code conflict: the draft was saved since base_revision; current is what is stored (nothing was overwritten). "
    "code name_taken: another graph has this name.",
)
INVALID_GRAPH = OpenApiResponse(ERROR_BODY, description="code graph_invalid: the validation errors are in error.issues.")


def _draft_conflict(exc: services.DraftConflict) -> Response:
    """The 409 of a refused save: the error and the draft as stored now."""
    body = {"error": {"code": "conflict", "message": str(exc), "fields": {}}, "current": DraftOutput(exc.graph).data}
    return Response(body, status=status.HTTP_409_CONFLICT)


def _check_name_free(name: str, graph: Graph | None = None) -> None:
    others = Graph.objects.filter(name=name)
    if graph is not None:
        others = others.exclude(pk=graph.pk)
    if others.exists():
        raise conflict("name_taken", f"A graph named {name!r} already exists.", fields={"name": ["A graph with this name already exists."]})


@contextmanager
def _name_taken_as_conflict(name: object, graph: Graph | None = None) -> Iterator[None]:
    """Run a write that gives a graph the name ``name`` in a savepoint, and turn the
    unique-name violation of a concurrent request that took the name between
    :func:`_check_name_free` and the insert into the same 409 ``name_taken`` (it was a
    500). Other integrity errors pass through."""
    try:
        with transaction.atomic():
            yield
    except IntegrityError:
        if isinstance(name, str):
            _check_name_free(name, graph=graph)
        raise


class GraphCollectionApi(ApiView):
    """GET: list graphs (``?search=``). POST: create a graph (builders)."""

    method_permissions = {"POST": [IsBuilder]}

    @extend_schema(
        tags=TAG,
        operation_id="graphs_list",
        parameters=[OpenApiParameter("search", str, description="Part of the name."), *PAGE_PARAMETERS],
        responses=paginated(GraphListOutput, "Graph"),
    )
    def get(self, request: Any) -> Response:
        search = request.query_params.get("search")
        return self.paginate(selectors.graph_list(search=search), GraphListOutput)

    @extend_schema(tags=TAG, operation_id="graphs_create", request=GraphCreateInput, responses={201: GraphDetailOutput, 409: NAME_TAKEN})
    def post(self, request: Any) -> Response:
        data = self.validated(GraphCreateInput, request.data)
        _check_name_free(data["name"])
        with _name_taken_as_conflict(data["name"]):
            graph = services.graph_create(user=request.user, **data)
        return Response(GraphDetailOutput(selectors.graph_get(graph_id=graph.pk)).data, status=status.HTTP_201_CREATED)


class GraphDetailApi(ApiView):
    """GET: one graph with its draft, revision and the draft's validation. PATCH: save
    the draft (``spec`` with ``base_revision``: 409 ``conflict`` with the stored draft
    when another save came first) and/or change name, description, approvers, operators
    and operator groups (builders). DELETE: delete it with its versions (builders; 409 ``graph_has_runs``
    with the count when runs are pinned to a version)."""

    method_permissions = {"PATCH": [IsBuilder], "DELETE": [IsBuilder]}

    @extend_schema(tags=TAG, operation_id="graphs_read", responses=GraphDetailOutput)
    def get(self, request: Any, graph_id: int) -> Response:
        return Response(GraphDetailOutput(selectors.graph_get(graph_id=graph_id)).data)

    @extend_schema(tags=TAG, operation_id="graphs_update", request=GraphUpdateInput, responses={200: GraphDetailOutput, 409: DRAFT_CONFLICT})
    def patch(self, request: Any, graph_id: int) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        data = self.validated(GraphUpdateInput, request.data)
        if "name" in data:
            _check_name_free(data["name"], graph=graph)
        spec, base = data.pop("spec", None), data.pop("base_revision", None)
        try:
            with _name_taken_as_conflict(data.get("name"), graph=graph):  # a refused save changes nothing else either
                if spec is not None:
                    graph = services.graph_draft_save(graph=graph, spec=spec, base_revision=base, user=request.user)
                if data:
                    services.graph_update(graph=graph, user=request.user, **data)
        except services.DraftConflict as exc:
            return _draft_conflict(exc)
        return Response(GraphDetailOutput(selectors.graph_get(graph_id=graph.pk)).data)

    @extend_schema(
        tags=TAG,
        operation_id="graphs_delete",
        responses={204: None, 409: OpenApiResponse(ERROR_BODY, description="code graph_has_runs: runs are pinned to its versions (error.runs, error.test_runs).")},
    )
    def delete(self, request: Any, graph_id: int) -> Response:
        try:
            services.graph_delete(graph=selectors.graph_get(graph_id=graph_id), user=request.user)
        except services.GraphHasRuns as exc:
            raise conflict("graph_has_runs", str(exc), runs=exc.runs, test_runs=exc.test_runs) from None
        return Response(status=status.HTTP_204_NO_CONTENT)


class GraphDuplicateApi(ApiView):
    """POST ``{"name"}``: a new graph with a copy of this graph's draft, description and
    approvers (no versions, no runs) (builders). 201 with the new graph."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="graphs_duplicate", request=DuplicateInput, responses={201: GraphDetailOutput, 409: NAME_TAKEN})
    def post(self, request: Any, graph_id: int) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        data = self.validated(DuplicateInput, request.data)
        _check_name_free(data["name"])
        with _name_taken_as_conflict(data["name"]):
            new = services.graph_duplicate(graph=graph, name=data["name"], user=request.user)
        return Response(GraphDetailOutput(selectors.graph_get(graph_id=new.pk)).data, status=status.HTTP_201_CREATED)


class GraphVersionCollectionApi(ApiView):
    """GET: the graph's versions, newest first, with who published each, when, and its
    message. POST ``{"message"}``: publish the draft as a new immutable version
    (builders): 201 with the new version, 200 with the existing one when the content was
    published before, 400 ``graph_invalid`` with the validation issues when the draft
    has errors (nothing published). A new version's answer carries ``warnings`` from the
    publish checks other apps register (builder.publish_checks), e.g. an enabled webhook
    that follows the latest version and whose input the new schema breaks."""

    method_permissions = {"POST": [IsBuilder]}

    @extend_schema(tags=TAG, operation_id="graph_versions_list", parameters=PAGE_PARAMETERS, responses=paginated(VersionListOutput, "Version"))
    def get(self, request: Any, graph_id: int) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        return self.paginate(selectors.graph_version_list(graph=graph), VersionListOutput)

    @extend_schema(
        tags=TAG,
        operation_id="graph_versions_publish",
        request=PublishInput,
        responses={201: PublishOutput, 200: PublishOutput, 400: INVALID_GRAPH},
    )
    def post(self, request: Any, graph_id: int) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        data = self.validated(PublishInput, request.data if request.data else {})
        version, created = services.graph_publish_draft(graph=graph, user=request.user, actor=request.user.get_username(), message=data["message"])
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        # Only a new version changes what "latest published" means to the triggers that follow it.
        warnings = [w.as_dict() for w in publish_checks.publish_warnings(version=version)] if created else []
        return Response({**VersionDetailOutput(version).data, "warnings": warnings}, status=code)


class GraphPublishCheckApi(ApiView):
    """GET: the warnings publishing the stored draft now would answer with (the Publish
    dialog shows them before the user publishes); nothing is published. Builders."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="graph_publish_check", responses=PublishCheckOutput)
    def get(self, request: Any, graph_id: int) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        return Response({"warnings": [w.as_dict() for w in publish_checks.draft_publish_warnings(graph=graph)]})


class GraphVersionDetailApi(ApiView):
    """GET: one version with its frozen spec."""

    @extend_schema(tags=TAG, operation_id="graph_versions_read", responses=VersionDetailOutput)
    def get(self, request: Any, graph_id: int, number: int) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        return Response(VersionDetailOutput(selectors.graph_version_get(graph=graph, number=number)).data)


class GraphVersionRestoreApi(ApiView):
    """POST ``{"base_revision"}``: make this version's spec the graph's new draft
    (builders), optimistically like any save: 409 ``conflict`` with the stored draft when
    the draft was saved since ``base_revision``. 200 with the graph."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="graph_versions_restore", request=RestoreInput, responses={200: GraphDetailOutput, 409: DRAFT_CONFLICT})
    def post(self, request: Any, graph_id: int, number: int) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        version = selectors.graph_version_get(graph=graph, number=number)
        data = self.validated(RestoreInput, request.data)
        try:
            services.graph_version_restore(graph=graph, version=version, base_revision=data["base_revision"], user=request.user)
        except services.DraftConflict as exc:
            return _draft_conflict(exc)
        return Response(GraphDetailOutput(selectors.graph_get(graph_id=graph.pk)).data)


class GraphVersionDiffApi(ApiView):
    """GET ``?from=<n>&to=<m>``: what changed between two versions of the graph."""

    @extend_schema(
        tags=TAG,
        operation_id="graph_versions_diff",
        parameters=[
            OpenApiParameter("from", int, required=True, description="Older version number."),
            OpenApiParameter("to", int, required=True, description="Newer version number."),
        ],
        responses=VersionDiffOutput,
    )
    def get(self, request: Any, graph_id: int) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        query = self.validated(VersionDiffInput, request.query_params)
        old = selectors.graph_version_get(graph=graph, number=query["from"])
        new = selectors.graph_version_get(graph=graph, number=query["to"])
        return Response(selectors.graph_version_diff(old=old, new=new))


class GraphValidateApi(ApiView):
    """POST a graph spec (JSON object): validate it without saving anything. Always 200
    for a JSON object: ``valid`` says whether a run could start on it; ``errors`` point
    at node and field; ``handles`` gives each node's handles (condition cases, approval
    outcomes) and ``estimate`` the worst-case cost per node and on the costliest path."""

    @extend_schema(tags=TAG, operation_id="graphs_validate", request=OpenApiTypes.OBJECT, responses=ValidationOutput)
    def post(self, request: Any) -> Response:
        if not isinstance(request.data, dict):
            raise bad_request("invalid", "The body must be a graph spec (a JSON object).", {"spec": ["Must be a JSON object."]})
        return Response(validation_report(request.data, user=request.user))


class GraphImportApi(ApiView):
    """POST a graph spec: publish it as a version of the graph it names (created if new;
    builders). The draft follows unless it holds unpublished edits, which are kept
    (``draft_kept``; services.graph_import). 201 new version, 200 same content already
    published, 400 with the validation issues (nothing saved)."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="graphs_import", request=OpenApiTypes.OBJECT, responses={201: ImportOutput, 200: ImportOutput})
    def post(self, request: Any) -> Response:
        if not isinstance(request.data, dict):
            raise bad_request("invalid", "The body must be a graph spec (a JSON object).", {"spec": ["Must be a JSON object."]})
        if has_nul(request.data):
            raise bad_request("invalid", "Strings may not contain NUL (\\u0000) characters.", {"spec": ["Contains a NUL character."]})
        with _name_taken_as_conflict(request.data.get("name")):
            imported = services.graph_import(spec=request.data, user=request.user, actor=request.user.get_username())
        version = imported.version
        body = ImportOutput(
            {"graph": version.graph_id, "name": version.graph.name, "version": version.number, "created": imported.created, "draft_kept": imported.draft_kept}
        ).data
        return Response(body, status=status.HTTP_201_CREATED if imported.created else status.HTTP_200_OK)


class GraphExportApi(ApiView):
    """GET the graph's spec as JSON that import accepts: ``?version=<n>``, ``?version=draft``,
    or by default the latest version (the draft when nothing was published)."""

    @extend_schema(
        tags=TAG,
        operation_id="graphs_export",
        parameters=[OpenApiParameter("version", str, description="A version number or 'draft'.", pattern=r"^(draft|[1-9][0-9]{0,8})$")],
        responses=OpenApiTypes.OBJECT,
    )
    def get(self, request: Any, graph_id: int) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        which = self.validated(ExportQueryInput, request.query_params).get("version")
        if which == "draft":
            return Response(graph.draft)
        if which is None:
            latest = graph.latest_version()
            return Response(latest.spec if latest else graph.draft)
        return Response(selectors.graph_version_get(graph=graph, number=int(which)).spec)


class GraphNodeTestApi(ApiView):
    """POST ``{"state": {...}, "node": {...}, "confirm": false}``: run one node of the graph's
    draft once (``node``, when sent, replaces the saved node: the editor's unsaved config),
    through its real node kind and provider, as a one-node test run (builders). The run
    is kept (marked as a test, left out of run lists and cost reports by default) with
    its cost and an audit entry. 200 with what the node did (a node that failed is a 200
    with status failed and the error); 400 ``graph_invalid`` when the node's config or
    kind checks fail, ``not_testable`` for a node that waits for a person; 404 for an
    unknown node; 428 ``confirmation_required`` when it would do something not safe to
    repeat (``error.effects``) and ``confirm`` is false."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(
        tags=TAG,
        operation_id="graph_nodes_test",
        request=NodeTestInput,
        responses={
            200: NodeTestOutput,
            400: INVALID_GRAPH,
            428: OpenApiResponse(ERROR_BODY, description="code confirmation_required: send confirm true to run it (error.effects)."),
        },
    )
    def post(self, request: Any, graph_id: int, node_id: str) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        data = self.validated(NodeTestInput, request.data if request.data else {})
        try:
            run = services.graph_node_test(
                graph=graph, node_id=node_id, state=data["state"], node_spec=data["node"], confirm=data["confirm"], user=request.user
            )
        except services.NodeNotFound:
            raise exceptions.NotFound(f"The draft has no node {node_id!r}.") from None
        except services.NodeNotTestable as exc:
            raise bad_request("not_testable", str(exc)) from None
        except services.ConfirmationRequired as exc:
            raise ApiError(status.HTTP_428_PRECONDITION_REQUIRED, "confirmation_required", str(exc), {"confirm": [str(exc)]}, effects=exc.effects) from None
        step = Step.objects.filter(run=run, node_id=node_id, parent__isnull=True).first()
        usage = step.usage if step is not None and step.usage else None
        if usage is None and (run.input_tokens or run.output_tokens):  # an agent: its model turns are child steps
            usage = {"input_tokens": run.input_tokens, "output_tokens": run.output_tokens}
        body = {
            "run_id": run.pk,
            "status": run.status,
            "output": step.output if step is not None else None,
            "updates": step.updates if step is not None else None,
            "state": run.state,
            "error": (step.error if step is not None and step.error else None) or run.error,
            "usage": usage,
            "cost_usd": run.cost_usd,
            "steps": run.steps.count(),
        }
        return Response(NodeTestOutput(body).data)


class GraphDraftRunApi(ApiView):
    """POST ``{"input": {...}}``: run the graph's saved draft without publishing it
    (builders, as testing a node). The draft is validated as a publish would, frozen as a
    hidden test snapshot and run from its start node through the queue as a test run:
    audited (``run.start``), costed, left out of run lists and reports unless tests are
    asked for. 201 with the run (queued; follow it on the run's events or page). 400
    ``graph_invalid`` (the draft's issues in ``error.issues``) or ``input_invalid`` (field
    errors under ``input.<path>``); nothing starts."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(
        tags=TAG,
        operation_id="graph_draft_run",
        request=DraftRunInput,
        responses={
            201: RunDetailOutput,
            400: OpenApiResponse(ERROR_BODY, description="code graph_invalid (error.issues) or input_invalid (error.fields)."),
        },
    )
    def post(self, request: Any, graph_id: int) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        data = self.validated(DraftRunInput, request.data if request.data else {})
        run = services.graph_draft_run(graph=graph, run_input=data["input"], user=request.user)
        return Response(RunDetailOutput(run_selectors.run_get(run_id=run.pk)).data, status=status.HTTP_201_CREATED)


class GraphPinApi(ApiView):
    """PUT ``{"data": {...}}``: pin ``data`` as the node's test data (the state Test node
    starts from and value previews resolve against), kept beside the draft: never
    published, never read by a run. DELETE: unpin it. Both builders, audited; 200 with
    every pin of the graph. 404 for a node the saved draft does not have; 400 with field
    errors under ``data`` (not an object, NUL, too large)."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="graph_pins_set", request=PinInput, responses={200: PinsOutput})
    def put(self, request: Any, graph_id: int, node_id: str) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        data = self.validated(PinInput, request.data)
        try:
            found = pins.graph_pin_set(graph=graph, node_id=node_id, data=data["data"], user=request.user)
        except LookupError:
            raise exceptions.NotFound(f"The saved draft has no node {node_id!r}.") from None
        return Response(PinsOutput({"pins": found}).data)

    @extend_schema(tags=TAG, operation_id="graph_pins_clear", responses={200: PinsOutput})
    def delete(self, request: Any, graph_id: int, node_id: str) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        return Response(PinsOutput({"pins": pins.graph_pin_clear(graph=graph, node_id=node_id, user=request.user)}).data)


class GraphPreviewApi(ApiView):
    """POST ``{"kind": "expression"|"template", "source", "state": {...}}``: what the
    expression or template resolves to against ``state`` (a node's pinned data or last
    input), evaluated by the engine's sandbox with a run's limits and time bound (builders:
    it spends server CPU). 200 with ``ok`` and the value, or ``ok`` false with the error
    (code, message, 1-based line and column, the unknown name); 400 with field errors for a
    malformed request."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="graph_draft_preview", request=PreviewInput, responses={200: PreviewOutput})
    def post(self, request: Any, graph_id: int) -> Response:
        selectors.graph_get(graph_id=graph_id)  # 404 for an unknown graph, as its other routes
        data = self.validated(PreviewInput, request.data)
        return Response(PreviewOutput(preview_source(data["kind"], data["source"], data["state"])).data)


class NodeKindListApi(ApiView):
    """GET: the node-kind catalogue for the builder's palette (every registered kind with
    its title, category, config JSON Schema and handles)."""

    @extend_schema(tags=["builder"], operation_id="node_kinds_list", responses=NodeKindsOutput)
    def get(self, request: Any) -> Response:
        return Response(NodeKindsOutput({"kinds": selectors.node_kind_catalogue()}).data)


class ToolListApi(ApiView):
    """GET: registered tools (name, description, JSON Schema of the arguments, repeat_safe)."""

    @extend_schema(tags=["builder"], operation_id="tools_list", responses=ToolsOutput)
    def get(self, request: Any) -> Response:
        return Response(ToolsOutput({"tools": selectors.tool_catalogue()}).data)


class ModelListApi(ApiView):
    """GET: per LLM provider, the models node forms can offer (from the provider or the
    price library)."""

    @extend_schema(tags=["builder"], operation_id="models_list", responses=ModelsOutput)
    def get(self, request: Any) -> Response:
        return Response(ModelsOutput({"providers": selectors.model_catalogue()}).data)


class ExpressionCheckApi(ApiView):
    """POST ``{"kind": "expression"|"template", "source", "state_keys"}``: check one
    expression or template as graph validation would (for editors that check as you
    type). Always 200 for a well-formed request; ``ok`` false lists the errors with 1-based
    line and column."""

    @extend_schema(tags=["builder"], operation_id="expressions_check", request=ExpressionCheckInput, responses=ExpressionCheckOutput)
    def post(self, request: Any) -> Response:
        data = self.validated(ExpressionCheckInput, request.data)
        return Response(ExpressionCheckOutput(check_source(data["kind"], data["source"], data.get("state_keys"))).data)
