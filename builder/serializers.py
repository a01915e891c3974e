"""Input and output serializers of the graph API (one pair per operation; outputs are read-only)."""
from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from builder.models import Graph, GraphVersion


@extend_schema_field(OpenApiTypes.OBJECT)
class JSONObjectField(serializers.JSONField):
    """A JSON object (dict); anything else is a field error."""

    default_error_messages = {"not_object": "Must be a JSON object."}

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            self.fail("not_object")
        return value


class UsernamesField(serializers.ListField):
    """A list of usernames, turned into users (an unknown name is a field error)."""

    child = serializers.CharField(max_length=150)

    def to_internal_value(self, data: Any) -> list[Any]:
        names = super().to_internal_value(data)
        users = {u.get_username(): u for u in get_user_model().objects.filter(username__in=names)}
        missing = sorted(set(names) - set(users))
        if missing:
            raise serializers.ValidationError(f"Unknown user(s): {', '.join(missing)}.")
        return [users[n] for n in dict.fromkeys(names)]


def _username(user: Any) -> str | None:
    return user.get_username() if user is not None else None


# --------------------------------------------------------------------------- graphs


class GraphCreateInput(serializers.Serializer):
    """POST /graphs/: a new graph; its draft may be invalid until published."""

    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    draft = JSONObjectField(required=False, default=dict)
    approvers = UsernamesField(required=False, default=list)



class GraphUpdateInput(serializers.Serializer):
    """PATCH /graphs/{id}/: any subset of name, description, draft, approvers."""

    name = serializers.CharField(max_length=200, required=False)
    description = serializers.CharField(required=False, allow_blank=True)
    draft = JSONObjectField(required=False)
    approvers = UsernamesField(required=False)



class GraphListOutput(serializers.Serializer):
    """A graph in a list (no draft)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField()
    latest_version = serializers.SerializerMethodField()
    created_by = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_latest_version(self, obj: Graph) -> int | None:
        if hasattr(obj, "latest_number"):  # annotated by builder.selectors.graph_list
            return obj.latest_number
        return obj.versions.order_by("-number").values_list("number", flat=True).first()

    def get_created_by(self, obj: Graph) -> str | None:
        return _username(obj.created_by)


class GraphDetailOutput(GraphListOutput):
    """A graph with its draft spec and named approvers."""

    draft = serializers.JSONField()
    approvers = serializers.SerializerMethodField()

    def get_approvers(self, obj: Graph) -> list[str]:
        return sorted(u.get_username() for u in obj.approvers.all())


# --------------------------------------------------------------------------- versions


class VersionListOutput(serializers.Serializer):
    """A published version in a list (no spec)."""

    graph = serializers.IntegerField(source="graph_id")
    number = serializers.IntegerField()
    content_hash = serializers.CharField()
    created_by = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()

    def get_created_by(self, obj: GraphVersion) -> str | None:
        return _username(obj.created_by)


class VersionDetailOutput(VersionListOutput):
    """A published version with its frozen spec."""

    spec = serializers.JSONField()


class IssueOutput(serializers.Serializer):
    """One validation problem: which node (null for the whole graph), field, message, code."""

    node_id = serializers.CharField(allow_null=True)
    field = serializers.CharField()
    message = serializers.CharField()
    code = serializers.CharField()


class ValidationOutput(serializers.Serializer):
    """Outcome of validating a spec: errors block runs, warnings do not."""

    valid = serializers.BooleanField()
    errors = IssueOutput(many=True)
    warnings = IssueOutput(many=True)


class ImportOutput(serializers.Serializer):
    """The graph and version an import saved (``created`` False: same content existed)."""

    graph = serializers.IntegerField()
    name = serializers.CharField()
    version = serializers.IntegerField()
    created = serializers.BooleanField()


class VersionDiffInput(serializers.Serializer):
    """?from=&to= version numbers (``from`` is a keyword, so it is added in __init__)."""

    to = serializers.IntegerField(min_value=1, max_value=2**31 - 1)

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["from"] = serializers.IntegerField(min_value=1, max_value=2**31 - 1)


class NodeChangeOutput(serializers.Serializer):
    id = serializers.CharField()
    fields = serializers.DictField(child=serializers.JSONField())


class NodesDiffOutput(serializers.Serializer):
    added = serializers.ListField(child=serializers.CharField())
    removed = serializers.ListField(child=serializers.CharField())
    changed = NodeChangeOutput(many=True)


class EdgesDiffOutput(serializers.Serializer):
    added = serializers.ListField(child=serializers.DictField())
    removed = serializers.ListField(child=serializers.DictField())


class VersionDiffOutput(serializers.Serializer):
    """What changed between two versions (see builder.selectors.spec_diff)."""

    to = serializers.IntegerField()
    nodes = NodesDiffOutput()
    edges = EdgesDiffOutput()
    settings = serializers.DictField(child=serializers.JSONField())
    state = serializers.DictField(child=serializers.JSONField())
    input_schema = serializers.JSONField(allow_null=True)
    description = serializers.JSONField(allow_null=True)
    identical = serializers.BooleanField()

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["from"] = serializers.IntegerField()


class ExportQueryInput(serializers.Serializer):
    """?version=<number>|draft (default: the latest version, or the draft before any)."""

    version = serializers.RegexField(r"^(draft|[1-9][0-9]{0,8})$", required=False)
