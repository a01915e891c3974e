"""Graphs (editable drafts) and graph versions (immutable, validated, what runs are pinned to).

The models moved here from the builder app (graphs 0001, builder 0004): their tables kept
their names (``builder_graph``, ``builder_graphversion`` and the graph's many-to-many
tables), so no row moved.
"""
from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

# The longest retention a graph may name (about 100 years): a bound, so a typo of many
# digits is refused rather than overflowing a date computation.
MAX_RETENTION_DAYS = 36500
# The largest concurrency limit a graph may name (runs.engine.store.flow): a bound, so a
# typo of many digits is refused rather than stored.
MAX_CONCURRENCY_LIMIT = 10000


class Graph(models.Model):
    """A named agent definition with an editable draft spec.

    ``draft`` is what the builder saves (it may be invalid); publishing validates it and
    freezes a :class:`GraphVersion`. ``approvers`` may decide this graph's approvals in
    addition to the approvers group. ``operators`` and ``operator_groups`` name who may
    operate its runs (start, cancel, resume, retry, fork, and read them); when both are
    empty the ``operators`` group does (``accounts.policy`` has the rule).

    ``draft_revision`` counts saves of the draft (1 at creation, bumped by every save,
    restore and import): a save names the revision it was made from and is refused when
    another save came first (optimistic concurrency, ``builder.services.graph_draft_save``).
    ``draft_updated_by``/``draft_updated_at`` say who saved it last and when.
    ``draft_pins``: the builder's pinned test data per node (``builder.services.graph_pin_set``).

    ``retention_days``: how many days its finished runs are kept after they finished
    (runs.retention); None: the BALLAST_RETENTION_DAYS default. One-node test runs follow
    BALLAST_TEST_RUN_RETENTION_DAYS, or this when it is shorter.

    Flow control across its runs (runs.engine.store.flow): ``max_concurrent_runs`` bounds
    its active runs (None: unlimited); ``concurrency_key`` is a dotted path into the run
    input (``customer_id``, ``customer.id``; "" for none) whose value groups runs, at most
    ``concurrency_key_limit`` active per value. Runs above a limit wait in line, queued.
    """

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True, default="")
    draft = models.JSONField(default=dict, blank=True)
    draft_revision = models.PositiveBigIntegerField(default=1)
    draft_updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    draft_updated_at = models.DateTimeField(null=True, blank=True)
    # Test data pinned per node in the builder ({node id: JSON object, the state a node test
    # and the value previews use}). Beside the draft, not in it: publishing, exports and runs
    # never read it, so the graph format and what runs execute stay as they were.
    draft_pins = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    approvers = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="approvable_graphs")
    operators = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="operable_graphs")
    operator_groups = models.ManyToManyField("auth.Group", blank=True, related_name="operable_graphs")
    retention_days = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(MAX_RETENTION_DAYS)]
    )
    max_concurrent_runs = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(MAX_CONCURRENCY_LIMIT)]
    )
    concurrency_key = models.CharField(max_length=200, blank=True, default="")
    concurrency_key_limit = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1), MaxValueValidator(MAX_CONCURRENCY_LIMIT)])
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        # The model moved here from the builder app; its table (and its many-to-many
        # tables, named after it) did not.
        db_table = "builder_graph"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def latest_version(self) -> GraphVersion | None:
        """The newest published version (test snapshots are not versions a user sees)."""
        return self.versions.filter(is_test=False).order_by("-number").first()


class GraphVersion(models.Model):
    """An immutable, validated copy of a graph's spec. Every run is pinned to one.

    ``content_hash`` is the SHA-256 of the canonical spec JSON; publishing the same
    content twice returns the existing version. ``message`` is the publisher's note.

    ``is_test`` marks a test snapshot: the one-node spec a "test this node" run is pinned
    to (``runs.services.node_test_run``). Snapshots have number 0, are never listed as
    versions, and are reused when the same node is tested again (unique content).
    """

    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    spec = models.JSONField()
    content_hash = models.CharField(max_length=64)
    message = models.CharField(max_length=500, blank=True, default="")
    is_test = models.BooleanField(default=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "builder_graphversion"  # moved from the builder app, as Graph
        ordering = ["graph", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["graph", "number"], condition=models.Q(is_test=False), name="graphversion_unique_number"),
            models.UniqueConstraint(
                fields=["graph", "content_hash"], condition=models.Q(is_test=False), name="graphversion_unique_content"
            ),
            models.UniqueConstraint(
                fields=["graph", "content_hash"], condition=models.Q(is_test=True), name="graphversion_unique_test_content"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.graph.name} v{self.number}"
