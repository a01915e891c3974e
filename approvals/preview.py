"""What an approval decides: the node(s) a gate leads to on approval, their arguments rendered from the current state, and a digest of it."""
from __future__ import annotations

import hashlib
import json
from typing import Any

from approvals.models import ApprovalRequest
from approvals.nodes import APPROVED, ApprovalConfig
from runs.engine.api import compiled_graph
from runs.sandbox.templating import TemplateError, render_template

# A rendered argument longer than this is cut in the preview (the digest sees it whole).
MAX_SHOWN_CHARS = 2000


def _render(value: Any, names: dict[str, Any], full: bool) -> Any:
    """``value`` with every template string rendered against ``names``; a template that
    cannot render shows why (``"⚠ <message>"``), so the approver sees what would fail."""
    if isinstance(value, str):
        if "{{" not in value and "{%" not in value:
            return value
        try:
            text = render_template(value, names)
        except TemplateError as exc:
            return f"⚠ cannot render yet: {exc.message}"
        return text if full or len(text) <= MAX_SHOWN_CHARS else text[:MAX_SHOWN_CHARS] + "…"
    if isinstance(value, dict):
        return {k: _render(v, names, full) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(v, names, full) for v in value]
    return value


def gate_config(request: ApprovalRequest) -> ApprovalConfig | None:
    """The gate node's config (None for a recovery request or a node that is gone)."""
    if request.purpose != "gate":
        return None
    node = compiled_graph(request.run.graph_version_id).topology.nodes.get(request.node_id)
    return ApprovalConfig.model_validate(node.config) if node is not None else None


def effective_state(request: ApprovalRequest) -> dict[str, Any]:
    """The run's current state with the request's edited values (if any) laid over it:
    what the next node would see if the request were approved now."""
    state = dict(request.run.state or {})
    if request.values:
        state.update(request.values)
    return state


def next_actions(request: ApprovalRequest, *, full: bool = False) -> list[dict[str, Any]]:
    """``[{"node_id", "kind", "label", "arguments"}]``: what the run does next if the
    request is approved (for a gate: the targets of its ``approved`` edges; for a recovery
    request: the interrupted node itself, retried), arguments rendered from the current
    state (``full``: uncut, for the digest)."""
    topology = compiled_graph(request.run.graph_version_id).topology
    if request.purpose == "gate":
        targets = [e.target for e in topology.out_edges.get(request.node_id, []) if (e.source_handle or APPROVED) == APPROVED]
    else:
        targets = [request.node_id.split("/")[0]]
    names = effective_state(request)
    names.setdefault("input", dict(request.run.input or {}))
    out = []
    for target in targets:
        node = topology.nodes.get(target)
        if node is None:
            continue
        out.append({"node_id": node.id, "kind": node.kind, "label": node.label or "", "arguments": _render(node.config, names, full)})
    return out


def action_digest(request: ApprovalRequest) -> str:
    """A short digest of :func:`next_actions` (uncut): it changes when what approving would
    do changes (a parallel branch wrote a key the next node reads, values were edited)."""
    text = json.dumps(next_actions(request, full=True), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def version_token(request: ApprovalRequest) -> str:
    """``"<row version>:<action digest>"``: what a decision must carry back."""
    return f"{request.version}:{action_digest(request)}"


def shown_state(request: ApprovalRequest) -> dict[str, Any]:
    """The part of the state the approver is shown: the gate's ``show_keys`` (all keys
    when it names none), edited values laid over it."""
    state = effective_state(request)
    config = gate_config(request)
    if config is not None and config.show_keys:
        return {k: state[k] for k in config.show_keys if k in state}
    return state
