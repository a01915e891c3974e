"""What the webhook and schedule APIs (triggers.apis, triggers.schedule_apis) share: the graph in the URL, the version and user an input names, and the list of a graph's triggers of one kind."""
from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import Model
from rest_framework import serializers
from rest_framework.response import Response

from graphs.models import Graph, GraphVersion
from triggers import services


def graph_of(graph_id: int) -> Graph:
    """The graph ``graph_id``; raises services.NotFoundError (404) when there is none."""
    graph = Graph.objects.filter(pk=graph_id).first()
    if graph is None:
        raise services.NotFoundError(f"graph {graph_id}")
    return graph


def version_of(graph: Graph, number: int | None) -> GraphVersion | None:
    """``graph``'s published version ``number`` (None: None, the latest published one);
    raises services.TriggerInvalid (400 naming ``version``) when there is no such version."""
    if number is None:
        return None
    version = GraphVersion.objects.filter(graph=graph, number=number, is_test=False).first()
    if version is None:
        raise services.TriggerInvalid("no such version", fields={"version": ["No such published version of this graph."]})
    return version


def user_named(username: str | None) -> Any:
    """The active user ``username`` (None: None, the caller); raises services.TriggerInvalid
    (400 naming ``run_as``) when there is no such active user."""
    if username is None:
        return None
    user = get_user_model().objects.filter(username=username, is_active=True).first()
    if user is None:
        raise services.TriggerInvalid("no such user", fields={"run_as": ["No such active user."]})
    return user


def with_references(graph: Graph, data: dict[str, Any]) -> dict[str, Any]:
    """Validated input ``data`` with the ``version`` number and the ``run_as`` username it
    carries (where present) replaced by the version and user they name (:func:`version_of`,
    then :func:`user_named`: the version's error first). A new dict."""
    data = dict(data)
    if "version" in data:
        data["version"] = version_of(graph, data["version"])
    if "run_as" in data:
        data["run_as"] = user_named(data["run_as"])
    return data


def graph_triggers(model: type[Model], output: type[serializers.Serializer], graph_id: int) -> Response:
    """The answer listing graph ``graph_id``'s rows of ``model`` (a trigger kind with
    ``graph``, ``version``, ``run_as`` and ``created_by``) as ``output``, in the model's order."""
    rows = model._default_manager.filter(graph=graph_of(graph_id)).select_related("version", "run_as", "created_by")
    return Response(output(rows, many=True).data)
