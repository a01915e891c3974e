"""Graph API views: drafts CRUD, versions (publish, list, read, diff), validate, import, export.

Reads are open to every authenticated user; writes need the ``builders`` role. Views
validate input, call a service or selector, and serialise the result.
"""
from __future__ import annotations

from typing import Any

from django.db.models import Max
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response

from accounts.authentication import IsBuilder
from ballast.api import ERROR_BODY, PAGE_PARAMETERS, ApiView, bad_request, conflict, paginated
from builder import selectors, services
from builder.models import Graph, GraphVersion
from builder.serializers import (
    ExportQueryInput,
    GraphCreateInput,
    GraphDetailOutput,
    GraphListOutput,
    GraphUpdateInput,
    ImportOutput,
    ValidationOutput,
    VersionDetailOutput,
    VersionDiffInput,
    VersionDiffOutput,
    VersionListOutput,
)
from builder.validation import validate_spec

TAG = ["graphs"]
NAME_TAKEN = OpenApiResponse(ERROR_BODY, description="Another graph has this name.")


def _check_name_free(name: str, graph: Graph | None = None) -> None:
    if Graph.objects.filter(name=name).exclude(pk=getattr(graph, "pk", None)).exists():
        raise conflict("name_taken", f"A graph named {name!r} already exists.", fields={"name": ["A graph with this name already exists."]})


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
        graph = services.graph_create(user=request.user, **data)
        return Response(GraphDetailOutput(selectors.graph_get(graph_id=graph.pk)).data, status=status.HTTP_201_CREATED)


class GraphDetailApi(ApiView):
    """GET: one graph with its draft. PATCH: update the draft, name, description or
    approvers (builders). DELETE: delete it with its versions (builders; 409 when runs
    are pinned to a version)."""

    method_permissions = {"PATCH": [IsBuilder], "DELETE": [IsBuilder]}

    @extend_schema(tags=TAG, operation_id="graphs_read", responses=GraphDetailOutput)
    def get(self, request: Any, graph_id: int) -> Response:
        return Response(GraphDetailOutput(selectors.graph_get(graph_id=graph_id)).data)

    @extend_schema(tags=TAG, operation_id="graphs_update", request=GraphUpdateInput, responses={200: GraphDetailOutput, 409: NAME_TAKEN})
    def patch(self, request: Any, graph_id: int) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        data = self.validated(GraphUpdateInput, request.data)
        if "name" in data:
            _check_name_free(data["name"], graph=graph)
        services.graph_update(graph=graph, user=request.user, **data)
        return Response(GraphDetailOutput(selectors.graph_get(graph_id=graph.pk)).data)

    @extend_schema(
        tags=TAG,
        operation_id="graphs_delete",
        responses={204: None, 409: OpenApiResponse(ERROR_BODY, description="Runs are pinned to a version of this graph.")},
    )
    def delete(self, request: Any, graph_id: int) -> Response:
        services.graph_delete(graph=selectors.graph_get(graph_id=graph_id), user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class GraphVersionCollectionApi(ApiView):
    """GET: the graph's versions, newest first. POST: publish the draft as a new version
    (builders): 201 with the new version, 200 with the existing one when the content was
    published before, 400 with the validation issues when the draft is invalid."""

    method_permissions = {"POST": [IsBuilder]}

    @extend_schema(tags=TAG, operation_id="graph_versions_list", parameters=PAGE_PARAMETERS, responses=paginated(VersionListOutput, "Version"))
    def get(self, request: Any, graph_id: int) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        return self.paginate(selectors.graph_version_list(graph=graph), VersionListOutput)

    @extend_schema(
        tags=TAG,
        operation_id="graph_versions_publish",
        request=None,
        responses={201: VersionDetailOutput, 200: VersionDetailOutput},
    )
    def post(self, request: Any, graph_id: int) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        before = graph.versions.aggregate(n=Max("number"))["n"] or 0
        version = services.graph_publish(graph=graph, user=request.user, actor=request.user.get_username())
        code = status.HTTP_201_CREATED if version.number > before else status.HTTP_200_OK
        return Response(VersionDetailOutput(version).data, status=code)


class GraphVersionDetailApi(ApiView):
    """GET: one version with its frozen spec."""

    @extend_schema(tags=TAG, operation_id="graph_versions_read", responses=VersionDetailOutput)
    def get(self, request: Any, graph_id: int, number: int) -> Response:
        graph = selectors.graph_get(graph_id=graph_id)
        return Response(VersionDetailOutput(selectors.graph_version_get(graph=graph, number=number)).data)


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
    for a JSON object: ``valid`` says whether a run could start on it."""

    @extend_schema(tags=TAG, operation_id="graphs_validate", request=OpenApiTypes.OBJECT, responses=ValidationOutput)
    def post(self, request: Any) -> Response:
        if not isinstance(request.data, dict):
            raise bad_request("invalid", "The body must be a graph spec (a JSON object).", {"spec": ["Must be a JSON object."]})
        return Response(validate_spec(request.data).as_dict())


class GraphImportApi(ApiView):
    """POST a graph spec: save it as the draft of the graph it names (created if new) and
    publish it (builders). 201 new version, 200 same content already published, 400 with
    the validation issues (nothing saved)."""

    permission_classes = ApiView.permission_classes + [IsBuilder]

    @extend_schema(tags=TAG, operation_id="graphs_import", request=OpenApiTypes.OBJECT, responses={201: ImportOutput, 200: ImportOutput})
    def post(self, request: Any) -> Response:
        if not isinstance(request.data, dict):
            raise bad_request("invalid", "The body must be a graph spec (a JSON object).", {"spec": ["Must be a JSON object."]})
        name = request.data.get("name")
        before = 0
        if isinstance(name, str):
            before = GraphVersion.objects.filter(graph__name=name).aggregate(n=Max("number"))["n"] or 0
        version = services.graph_import(spec=request.data, user=request.user, actor=request.user.get_username())
        created = version.number > before
        body = ImportOutput({"graph": version.graph_id, "name": version.graph.name, "version": version.number, "created": created}).data
        return Response(body, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)


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
