"""Graphs (editable drafts) and graph versions (immutable, validated, what runs are pinned to)."""
from __future__ import annotations

from django.conf import settings
from django.db import models


class Graph(models.Model):
    """A named agent definition with an editable draft spec.

    ``draft`` is what the builder saves (it may be invalid); publishing validates it and
    freezes a :class:`GraphVersion`. ``approvers`` may decide this graph's approvals in
    addition to the approvers group.
    """

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True, default="")
    draft = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    approvers = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="approvable_graphs")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def latest_version(self) -> GraphVersion | None:
        return self.versions.order_by("-number").first()


class GraphVersion(models.Model):
    """An immutable, validated copy of a graph's spec. Every run is pinned to one.

    ``content_hash`` is the SHA-256 of the canonical spec JSON; publishing the same
    content twice returns the existing version.
    """

    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    spec = models.JSONField()
    content_hash = models.CharField(max_length=64)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["graph", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["graph", "number"], name="graphversion_unique_number"),
            models.UniqueConstraint(fields=["graph", "content_hash"], name="graphversion_unique_content"),
        ]

    def __str__(self) -> str:
        return f"{self.graph.name} v{self.number}"
