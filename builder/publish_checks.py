"""Checks other apps register to warn about what a newly published version breaks (a publish is never refused by them).

The builder sits below the apps that depend on its graphs (triggers, ...) in the layers
contract, so it cannot ask them; they register a check here in their AppConfig.ready and
the publish API runs every check on each new version.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from builder.validation import validate_spec
from graphs.models import Graph, GraphVersion
from graphs.spec import content_hash

log = logging.getLogger("ballast.builder")


@dataclass(frozen=True)
class PublishWarning:
    """One thing the new version breaks: ``code`` (e.g. ``trigger_input``), ``message``
    in words, ``subject`` what it is about (``{"kind": "webhook", "id": 3, "name":
    "orders"}``) and ``fields`` the settings at fault (``{"input_mapping.x": [text]}``)."""

    code: str
    message: str
    subject: dict[str, Any]
    fields: dict[str, list[str]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The API shape: ``{"code", "message", "subject", "fields"}``."""
        return {"code": self.code, "message": self.message, "subject": self.subject, "fields": self.fields}


#: A check: given the new version and the version that was the latest published before
#: it (None for a first publish), the warnings it raises ([] for none).
PublishCheck = Callable[[GraphVersion, "GraphVersion | None"], list[PublishWarning]]

_checks: list[PublishCheck] = []


def register(check: PublishCheck) -> PublishCheck:
    """Add ``check`` to every publish (once: registering it again changes nothing); returns it."""
    if check not in _checks:
        _checks.append(check)
    return check


def previous_version(version: GraphVersion) -> GraphVersion | None:
    """The published version before ``version`` (by number), or None for the first."""
    return GraphVersion.objects.filter(graph_id=version.graph_id, is_test=False, number__lt=version.number).order_by("-number").first()


def publish_warnings(*, version: GraphVersion, previous: Any = None) -> list[PublishWarning]:
    """Every registered check's warnings about ``version``, a version just published (or
    about to be: :func:`draft_publish_warnings`), against ``previous`` (default: the
    published version before it). A check that raises is logged and skipped: a broken
    check must not turn a done publish into an error."""
    if previous is None:
        previous = previous_version(version)
    found: list[PublishWarning] = []
    for check in list(_checks):
        try:
            found.extend(check(version, previous))
        except Exception:
            log.exception("publish check %r failed on version %s of graph %s", check, version.number, version.graph_id)
    return found


def draft_publish_warnings(*, graph: Graph) -> list[PublishWarning]:
    """What publishing ``graph``'s stored draft now would warn about, before it is
    published: [] when the draft is invalid (the publish would be refused anyway) or holds
    the content of the latest version (nothing new would be published). Reads only."""
    result = validate_spec(graph.draft)
    if not result.ok or result.spec is None:  # (ok implies a spec; said for mypy)
        return []
    spec = result.spec.model_dump(mode="json", exclude_none=False)
    latest = graph.latest_version()
    if latest is not None and latest.content_hash == content_hash(spec):
        return []
    # Never saved: the checks read its graph, number and spec only.
    candidate = GraphVersion(graph=graph, number=(latest.number if latest else 0) + 1, spec=spec, content_hash=content_hash(spec))
    return publish_warnings(version=candidate, previous=latest)
