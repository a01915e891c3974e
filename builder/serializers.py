"""Input and output serializers of the graph API (one pair per operation; outputs are read-only)."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from accounts.fields import GroupNamesField, UsernamesField
from builder.flow_control import KEY_PATH
from builder.preview import ERROR_CODES, VALUE_TYPES
from builder.validation import validation_report
from graphs.models import MAX_CONCURRENCY_LIMIT, MAX_RETENTION_DAYS, Graph, GraphVersion
from runs.api.serializer_fields import EngineErrorField, JSONObjectField, UsageField
from runs.models import Run, RunStatus


def _username(user: Any) -> str | None:
    return user.get_username() if user is not None else None


# --------------------------------------------------------------------------- validation


class IssueOutput(serializers.Serializer):
    """One validation problem: which node (null for the whole graph), field, message, code.

    ``field`` is relative to the node (``config.cases[0].expression``) or, for a graph
    problem, a spec path (``edges[3].target``); ``path`` is always from the spec root
    (``nodes[2].config.cases[0].expression``; ``nodes[2]`` for the pseudo-fields
    ``incoming``, ``outgoing``, ``handles.*``, ``writes.*``). ``node_id`` = ``node``."""

    code = serializers.CharField()
    node = serializers.CharField(allow_null=True)
    node_id = serializers.CharField(allow_null=True)
    field = serializers.CharField()
    path = serializers.CharField()
    message = serializers.CharField()


class NodeHandlesOutput(serializers.Serializer):
    """A node's handles on the canvas: named outputs ([] = one default output, see
    ``default_output``; an end node has none)."""

    inputs = serializers.ListField(child=serializers.CharField())
    outputs = serializers.ListField(child=serializers.CharField())
    default_output = serializers.BooleanField()
    optional = serializers.ListField(child=serializers.CharField(), help_text="Outputs that may stay unwired.")


class NodeEstimateOutput(serializers.Serializer):
    usd = serializers.CharField(allow_null=True, help_text="Worst case in USD (decimal string); null when unknown.")
    tokens = serializers.IntegerField()
    kind = serializers.CharField(help_text="A node kind registered on the server (GET /api/v1/node-kinds/; plug-ins add their own).")
    model = serializers.CharField(allow_null=True)


class CostliestPathOutput(serializers.Serializer):
    nodes = serializers.ListField(child=serializers.CharField())
    usd = serializers.CharField(help_text="Sum of the known prices (decimal string).")
    tokens = serializers.IntegerField()
    unpriced = serializers.ListField(child=serializers.CharField(), help_text="Nodes on the path with no known price.")
    loops = serializers.ListField(child=serializers.CharField(), help_text="Bounded loops on the path, counted max_iterations + 1 times.")


class EstimateOutput(serializers.Serializer):
    """Pre-run worst-case cost: per node, and the costliest path from start to an end."""

    nodes = serializers.DictField(child=NodeEstimateOutput())
    costliest_path = CostliestPathOutput()


class ValidationOutput(serializers.Serializer):
    """Outcome of validating a spec: errors block runs, warnings do not; each node's
    handles; the cost estimate (null when the spec did not parse)."""

    valid = serializers.BooleanField()
    errors = IssueOutput(many=True)  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    warnings = IssueOutput(many=True)
    handles = serializers.DictField(child=NodeHandlesOutput())
    estimate = EstimateOutput(allow_null=True)
    content_hash = serializers.CharField(
        allow_null=True, help_text="The hash a publish of this spec would store (null when invalid): equal to a version's, the draft is that version."
    )


# --------------------------------------------------------------------------- graphs


class RetentionDaysField(serializers.IntegerField):
    """A graph's ``retention_days``: whole days 1..MAX_RETENTION_DAYS, or null (the
    server's default); anything else is refused with the field named."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", "Days its finished runs are kept after they finish (null: the server's default, BALLAST_RETENTION_DAYS).")
        super().__init__(min_value=1, max_value=MAX_RETENTION_DAYS, allow_null=True, required=False, **kwargs)


class FlowControlInput(serializers.Serializer):
    """A graph's flow control (runs.engine.store.flow), each field optional: refused with
    the field named when out of range (builder.flow_control)."""

    max_concurrent_runs = serializers.IntegerField(
        min_value=1, max_value=MAX_CONCURRENCY_LIMIT, allow_null=True, required=False,
        help_text="At most this many of its runs active at once (queued, running, waiting); the rest wait in line. null: unlimited.",
    )
    concurrency_key = serializers.RegexField(
        KEY_PATH, max_length=200, allow_blank=True, required=False,
        error_messages={"invalid": "A dotted path into the run input, such as customer_id or customer.id (letters, digits, _ and -)."},
        help_text="A dotted path into the run input (customer_id): runs with the same value share concurrency_key_limit. Empty: none.",
    )
    concurrency_key_limit = serializers.IntegerField(
        min_value=1, max_value=MAX_CONCURRENCY_LIMIT, required=False, help_text="Active runs at most per concurrency key value (default 1)."
    )


class GraphCreateInput(FlowControlInput):
    """POST /graphs/: a new graph; its draft may be invalid until published."""

    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True, default="")
    draft = JSONObjectField(required=False, default=dict)
    approvers = UsernamesField(required=False, default=list)
    operators = UsernamesField(required=False, default=list, help_text="Users who may operate its runs (none named: the operators group).")
    operator_groups = GroupNamesField(required=False, default=list, help_text="Groups whose members may operate its runs.")
    retention_days = RetentionDaysField()



class GraphUpdateInput(FlowControlInput):
    """PATCH /graphs/{id}/: any subset of name, description, approvers, operators,
    operator groups, and the draft
    ``spec`` (``draft`` is the older name of the same field) with the ``base_revision``
    it was edited from, which a draft save requires (optimistic saving: 409 when another
    save came first)."""

    name = serializers.CharField(max_length=200, required=False)
    description = serializers.CharField(required=False, allow_blank=True)
    spec = JSONObjectField(required=False, help_text="The new draft spec (may be invalid until published).")
    draft = JSONObjectField(required=False, help_text="Same as spec (older name).")
    base_revision = serializers.IntegerField(
        min_value=1, max_value=2**63 - 1, required=False, help_text="The draft revision this spec was edited from (required with spec)."
    )
    approvers = UsernamesField(required=False)
    operators = UsernamesField(required=False, help_text="Users who may operate its runs (none named: the operators group).")
    operator_groups = GroupNamesField(required=False, help_text="Groups whose members may operate its runs.")
    retention_days = RetentionDaysField()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "spec" in attrs and "draft" in attrs:
            raise serializers.ValidationError({"draft": ["Give spec or draft, not both."]})
        if "draft" in attrs:
            attrs["spec"] = attrs.pop("draft")
        if "spec" in attrs and "base_revision" not in attrs:
            raise serializers.ValidationError({"base_revision": ["Required when saving the spec: the revision it was edited from."]})
        return attrs



class GraphListOutput(serializers.Serializer):
    """A graph in a list (no draft)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    description = serializers.CharField()
    latest_version = serializers.SerializerMethodField()
    created_by = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    run_count = serializers.SerializerMethodField(help_text="Runs pinned to its versions (node test runs included).")
    retention_days = serializers.IntegerField(allow_null=True, help_text="Days its finished runs are kept (null: the server's default).")
    max_concurrent_runs = serializers.IntegerField(allow_null=True, help_text="At most this many active runs (null: unlimited).")
    concurrency_key = serializers.CharField(help_text="A dotted path into the run input grouping runs (empty: none).")
    concurrency_key_limit = serializers.IntegerField(help_text="Active runs at most per concurrency key value.")
    deletable = serializers.SerializerMethodField(help_text="False when runs exist: a graph with runs cannot be deleted.")

    def get_run_count(self, obj: Graph) -> int:
        if hasattr(obj, "run_count"):  # annotated by builder.selectors.graph_list
            return int(obj.run_count)

        return Run.objects.filter(graph_version__graph=obj).count()

    def get_deletable(self, obj: Graph) -> bool:
        return self.get_run_count(obj) == 0

    def get_latest_version(self, obj: Graph) -> int | None:
        if hasattr(obj, "latest_number"):  # annotated by builder.selectors.graph_list
            return obj.latest_number
        return obj.versions.filter(is_test=False).order_by("-number").values_list("number", flat=True).first()

    def get_created_by(self, obj: Graph) -> str | None:
        return _username(obj.created_by)


class GraphDetailOutput(GraphListOutput):
    """A graph with its draft spec (``draft``, also as ``spec``), the draft's revision and
    who saved it when, its named approvers and operators (users, groups: who may start
    and act on its runs; none named: the operators group), and the validation of the draft (errors,
    handles per node, cost estimate: as POST /graphs/validate/ answers)."""

    draft = serializers.JSONField()
    spec = serializers.JSONField(source="draft")
    revision = serializers.IntegerField(source="draft_revision")
    draft_updated_by = serializers.SerializerMethodField()
    draft_updated_at = serializers.DateTimeField(allow_null=True)
    approvers = serializers.SerializerMethodField()
    operators = serializers.SerializerMethodField()
    operator_groups = serializers.SerializerMethodField()
    validation = serializers.SerializerMethodField()
    pins = serializers.DictField(
        source="draft_pins", child=serializers.JSONField(),
        help_text="Test data pinned per node ({node id: the state its tests and previews use}); kept beside the draft, never published.",
    )

    def get_approvers(self, obj: Graph) -> list[str]:
        return sorted(u.get_username() for u in obj.approvers.all())

    def get_operators(self, obj: Graph) -> list[str]:
        return sorted(u.get_username() for u in obj.operators.all())

    def get_operator_groups(self, obj: Graph) -> list[str]:
        return sorted(g.name for g in obj.operator_groups.all())

    def get_draft_updated_by(self, obj: Graph) -> str | None:
        return _username(obj.draft_updated_by)

    @extend_schema_field(ValidationOutput)
    def get_validation(self, obj: Graph) -> dict[str, Any]:
        return validation_report(obj.draft)


class DraftOutput(serializers.Serializer):
    """The stored draft: what a save conflicted with."""

    spec = serializers.JSONField(source="draft")
    revision = serializers.IntegerField(source="draft_revision")
    updated_by = serializers.SerializerMethodField()
    updated_at = serializers.DateTimeField(source="draft_updated_at", allow_null=True)

    def get_updated_by(self, obj: Graph) -> str | None:
        return _username(obj.draft_updated_by)


class DuplicateInput(serializers.Serializer):
    """POST /graphs/{id}/duplicate/: the new graph's name."""

    name = serializers.CharField(max_length=200)


class PublishInput(serializers.Serializer):
    """POST /graphs/{id}/versions/: what this version changes (optional)."""

    message = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class RestoreInput(serializers.Serializer):
    """POST /graphs/{id}/versions/{n}/restore/: the draft revision the restore replaces."""

    base_revision = serializers.IntegerField(min_value=1, max_value=2**63 - 1)


# --------------------------------------------------------------------------- versions


class VersionListOutput(serializers.Serializer):
    """A published version in a list (no spec)."""

    graph = serializers.IntegerField(source="graph_id")
    number = serializers.IntegerField()
    message = serializers.CharField(help_text="The publisher's note.")
    content_hash = serializers.CharField()
    created_by = serializers.SerializerMethodField(help_text="Who published it.")
    created_at = serializers.DateTimeField(help_text="When it was published.")

    def get_created_by(self, obj: GraphVersion) -> str | None:
        return _username(obj.created_by)


class VersionDetailOutput(VersionListOutput):
    """A published version with its frozen spec."""

    spec = serializers.JSONField()


class PublishSubjectOutput(serializers.Serializer):
    """What a publish warning is about (schema only: the answer carries the check's dict)."""

    kind = serializers.CharField()
    id = serializers.IntegerField(required=False)
    name = serializers.CharField(required=False)


@extend_schema_field(PublishSubjectOutput)
class PublishSubjectField(serializers.JSONField):
    """A publish warning's subject, returned as the check made it."""


class PublishWarningOutput(serializers.Serializer):
    """Something the new version breaks (builder.publish_checks): a trigger it names, say."""

    code = serializers.CharField()
    message = serializers.CharField()
    subject = PublishSubjectField(help_text='What it is about, e.g. {"kind": "webhook", "id": 3, "name": "orders"}.')

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # ``fields`` (the settings at fault, as in error bodies) is a Serializer attribute.
        self.fields["fields"] = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))


class PublishOutput(VersionDetailOutput):
    """A publish's answer: the version, and ``warnings`` about what it breaks ([] when
    nothing, and always [] when the same content was published before)."""

    warnings = PublishWarningOutput(many=True)


class PublishCheckOutput(serializers.Serializer):
    """What publishing the stored draft now would warn about (nothing is published)."""

    warnings = PublishWarningOutput(many=True)


class ImportOutput(serializers.Serializer):
    """The graph and version an import saved (``created`` False: same content existed)."""

    graph = serializers.IntegerField()
    name = serializers.CharField()
    version = serializers.IntegerField()
    created = serializers.BooleanField()
    draft_kept = serializers.BooleanField(help_text="The graph's draft had unpublished edits and was left as it was; the spec was published beside it.")


class VersionDiffInput(serializers.Serializer):
    """?from=&to= version numbers (``from`` is a keyword, so it is added in __init__)."""

    to = serializers.IntegerField(min_value=1, max_value=2**31 - 1)

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["from"] = serializers.IntegerField(min_value=1, max_value=2**31 - 1)


# A changed field or key: its value before and after (null on one side: added or removed).
# Built with type() because "from" is a Python keyword; schema only (the diff view answers
# with builder.selectors.spec_diff's dict).
FieldChangeOutput: type[serializers.Serializer] = type(
    "FieldChangeOutput",
    (serializers.Serializer,),
    {"__module__": __name__, "from": serializers.JSONField(allow_null=True), "to": serializers.JSONField(allow_null=True)},
)


class DiffEdgeOutput(serializers.Serializer):
    """An edge of the spec as the diff lists it (other keys of the edge may appear)."""

    source = serializers.CharField()  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    target = serializers.CharField()
    source_handle = serializers.CharField(allow_null=True, required=False)
    target_handle = serializers.CharField(allow_null=True, required=False)


class NodeChangeOutput(serializers.Serializer):
    id = serializers.CharField()
    fields = serializers.DictField(child=FieldChangeOutput())  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class


class _IdsDiffOutput(serializers.Serializer):
    """Ids added and removed, and the ids whose fields changed (with those fields)."""

    added = serializers.ListField(child=serializers.CharField())
    removed = serializers.ListField(child=serializers.CharField())
    changed = NodeChangeOutput(many=True)


class NodesDiffOutput(_IdsDiffOutput):
    """Nodes added, removed and changed (same shape as the notes, a schema component of its own)."""


class EdgesDiffOutput(serializers.Serializer):
    added = DiffEdgeOutput(many=True)
    removed = DiffEdgeOutput(many=True)


class NotesDiffOutput(_IdsDiffOutput):
    """Sticky notes added, removed and changed."""


class LayoutDiffOutput(serializers.Serializer):
    """Layout changes (no effect on runs): nodes that moved, sticky notes."""

    positions = serializers.ListField(child=serializers.CharField())
    notes = NotesDiffOutput()


class VersionDiffOutput(serializers.Serializer):
    """What changed between two versions (see builder.selectors.spec_diff); layout apart."""

    to = serializers.IntegerField()
    nodes = NodesDiffOutput()
    edges = EdgesDiffOutput()
    settings = serializers.DictField(child=FieldChangeOutput())
    state = serializers.DictField(child=FieldChangeOutput())
    input_schema = FieldChangeOutput(allow_null=True)
    description = FieldChangeOutput(allow_null=True)
    layout = LayoutDiffOutput()
    logic_identical = serializers.BooleanField(help_text="Nothing but layout changed.")
    identical = serializers.BooleanField()

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["from"] = serializers.IntegerField()


class ExportQueryInput(serializers.Serializer):
    """?version=<number>|draft (default: the latest version, or the draft before any)."""

    version = serializers.RegexField(r"^(draft|[1-9][0-9]{0,8})$", required=False)


# --------------------------------------------------------------------------- builder tools


class ExpressionCheckInput(serializers.Serializer):
    """POST /expressions/check/: one expression or template, and the state keys known."""

    kind = serializers.ChoiceField(choices=["expression", "template"])
    source = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=100_000)  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    state_keys = serializers.ListField(
        child=serializers.CharField(max_length=200), required=False, allow_null=True, max_length=10_000,
        help_text="Names known besides input and the functions; omitted: names are not checked.",
    )


class SourceErrorOutput(serializers.Serializer):
    message = serializers.CharField()
    line = serializers.IntegerField(allow_null=True, help_text="1-based.")
    column = serializers.IntegerField(allow_null=True, help_text="1-based.")
    code = serializers.CharField()


class ExpressionCheckOutput(serializers.Serializer):
    ok = serializers.BooleanField()
    errors = SourceErrorOutput(many=True)  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    names = serializers.ListField(child=serializers.CharField(), help_text="Variables the source reads.")


class NodeKindOutput(serializers.Serializer):
    """One node kind of the palette (see builder.selectors.node_kind_catalogue)."""

    kind = serializers.CharField(help_text="A node kind registered on the server (GET /api/v1/node-kinds/; plug-ins add their own).")
    title = serializers.CharField()
    description = serializers.CharField()
    category = serializers.ChoiceField(choices=["ai", "logic", "flow", "tools", "human", "data"])
    config_schema = JSONObjectField(help_text="The JSON Schema of the kind's config.")
    inputs = serializers.ListField(child=serializers.CharField())
    outputs = serializers.ListField(child=serializers.CharField())
    optional_outputs = serializers.ListField(child=serializers.CharField())
    default_output = serializers.BooleanField()
    dynamic_outputs = serializers.BooleanField()
    repeat_safe = serializers.BooleanField()
    uses_repeat_safe = serializers.BooleanField(
        help_text="Whether a node's own repeat_safe field applies to this kind (validation refuses it otherwise)."
    )
    does_work = serializers.BooleanField(
        help_text="Whether the step does something itself (false for start, end, join): timeout, retry and a test run apply only then."
    )
    can_loop = serializers.BooleanField(help_text="Whether a node of this kind can be on a loop (it has inputs and outputs), so max_iterations applies.")


class NodeKindsOutput(serializers.Serializer):
    kinds = NodeKindOutput(many=True)


class ToolOutput(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    args_schema = JSONObjectField(help_text="The JSON Schema of the tool's arguments.")
    repeat_safe = serializers.BooleanField()
    mcp_server = serializers.CharField(allow_null=True, help_text="The MCP server the tool lives on (its name is mcp__<server>__<tool>); null for a registered Python tool.")


class ToolsOutput(serializers.Serializer):
    tools = ToolOutput(many=True)


class ModelOutput(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    priced = serializers.BooleanField()


class ProviderModelsOutput(serializers.Serializer):
    provider = serializers.CharField()
    models = ModelOutput(many=True)
    source = serializers.ChoiceField(choices=["provider", "price_library", "none"])  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    accepts_any_model = serializers.BooleanField()
    error = serializers.CharField(required=False)


class ModelsOutput(serializers.Serializer):
    providers = ProviderModelsOutput(many=True)


class NodeTestInput(serializers.Serializer):
    """POST /graphs/{id}/nodes/{node_id}/test/: the state the node sees, the node as the
    editor holds it (optional), and whether a side effect that is not safe to repeat may run."""

    state = JSONObjectField(required=False, default=dict)
    node = JSONObjectField(
        required=False,
        default=None,
        allow_null=True,
        help_text="The node spec to test, as the editor holds it (unsaved edits included); omitted: the node as saved in the draft.",
    )
    confirm = serializers.BooleanField(required=False, default=False)


class DraftRunInput(serializers.Serializer):
    """POST /graphs/{id}/draft/run/: the run input (checked against the draft's input schema)."""

    input = JSONObjectField(required=False, default=dict, help_text="The run input: a JSON object matching the draft's input_schema.")


class NodeTestOutput(serializers.Serializer):
    """The test run and what the node did."""

    run_id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=[RunStatus.SUCCEEDED, RunStatus.FAILED], help_text="The test run's status.")
    output = serializers.JSONField(allow_null=True, help_text="The node's recorded output.")
    updates = serializers.JSONField(allow_null=True, help_text="What it wrote to the state.")
    state = serializers.JSONField(help_text="The state after the node.")
    error = EngineErrorField(allow_null=True)
    usage = UsageField(allow_null=True, help_text="Token usage (summed over an agent's model turns).")
    cost_usd = serializers.DecimalField(max_digits=20, decimal_places=12)
    steps = serializers.IntegerField(help_text="Steps the test run took (the node, its child steps, the closing end).")


class PinInput(serializers.Serializer):
    """PUT /graphs/{id}/draft/pins/{node_id}/: the state to pin as the node's test data."""

    data = JSONObjectField(help_text="The node's input state to test and preview with (a JSON object).")  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class


class PinsOutput(serializers.Serializer):
    """Every pin of the graph after the change."""

    pins = serializers.DictField(child=serializers.JSONField(), help_text="{node id: pinned state}.")


class PreviewInput(serializers.Serializer):
    """POST /graphs/{id}/draft/preview/: one expression or template and the state to resolve it against."""

    kind = serializers.ChoiceField(choices=["expression", "template"])
    source = serializers.CharField(allow_blank=False, trim_whitespace=False, max_length=100_000)  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    state = JSONObjectField(help_text="The node's input state (its pinned data or last input); input is the run input.")


class PreviewErrorOutput(serializers.Serializer):
    code = serializers.ChoiceField(choices=ERROR_CODES)
    message = serializers.CharField()
    line = serializers.IntegerField(allow_null=True, help_text="1-based, in source.")
    column = serializers.IntegerField(allow_null=True, help_text="1-based, in source.")
    name = serializers.CharField(allow_null=True, help_text="The unknown variable, when that is the error.")


class PreviewOutput(serializers.Serializer):
    """What the source resolved to (ok) or why it did not (error), as a run would see it."""

    ok = serializers.BooleanField()
    value = serializers.JSONField(required=False, allow_null=True, help_text="The expression's value or the template's text.")
    type = serializers.ChoiceField(choices=VALUE_TYPES, required=False)
    display = serializers.CharField(required=False, help_text="value as JSON (a template's text as is), clipped.")
    truncated = serializers.BooleanField(required=False)
    error = PreviewErrorOutput(required=False)
