"""The approval node kind: pause the run as a row until a person decides, then route by the decision."""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, ClassVar, Literal

from pydantic import Field

from approvals.models import ApprovalRequest, ApprovalStatus, principals_text
from approvals.notify import notify_on_commit
from runs.nodes.base import DueOutcome, Issue, NodeConfig, NodeContext, NodeKind, NodeResult, Wait
from runs.nodes.shared import STATE_KEY_PATTERN, check_template, expression_names
from runs.sandbox.expressions import ExpressionError
from runs.vocabulary import NodeError

# _lazy_imports_note: jsonschema (about 0.2 s of CPU) and Jinja2 (0.1 s) are imported
# where they are used, not here: every worker imports this module at start (the approvals
# app connects its receivers), and a restarted worker's start is what recovery waits for
# (tests/runs/engine/test_worker_imports.py keeps them out of its start).

# The handles of an approval node: a decision takes exactly one.
APPROVED = "approved"
REJECTED = "rejected"
# The handle a deadline with escalation "timeout" follows (only such a node has it).
TIMEOUT = "timeout"

# "30m", "4h", "2d", "1h30m", "90s", "1w": a number and a unit, one or more times.
_DURATION_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
MAX_DEADLINE_SECONDS = 366 * 86400


def parse_duration(text: str) -> float:
    """Seconds in a duration such as ``30m``, ``4h``, ``2d``, ``1h30m``, ``90s``, ``1w``
    (units s, m, h, d, w; parts add up). Raises ValueError (with a message for a person)
    when it does not parse or is not between 1 second and 366 days."""
    pos, total, raw = 0, 0.0, text.strip()
    while pos < len(raw):
        match = _DURATION_PART.match(raw, pos)
        if match is None:
            raise ValueError(f"'{text}' is not a duration: write a number and a unit (s, m, h, d, w), such as 30m, 4h, 2d or 1h30m")
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2).lower()]
        pos = match.end()
    if not raw:
        raise ValueError("a deadline needs a duration, such as 30m, 4h or 2d")
    if not 1 <= total <= MAX_DEADLINE_SECONDS:
        raise ValueError(f"a deadline is between 1 second and 366 days, not {total:g} seconds")
    return total


class ApprovalConfig(NodeConfig):
    """``prompt`` (a template over the state) is shown to the approver; ``approvers`` and
    ``approver_groups`` (usernames, group names) say who may decide, empty = anyone with
    the approver role; the decision is written to state under ``output_key``."""

    prompt: str = Field("Approve?", max_length=10000, title="Prompt", description="Shown to the approver; a template over the state.")
    approvers: list[str] = Field(default_factory=list, title="Approvers", description="Usernames who may decide; leave empty for anyone with the approver role.")
    approver_groups: list[str] = Field(default_factory=list, title="Approver groups", description="Groups whose members may decide.")
    output_key: str = Field("approval", title="Output state key", description="The state key the decision is written to.")
    quorum: int = Field(1, ge=1, le=20, title="Approvals needed", description="Distinct people who must approve; one rejection rejects.")
    starter_counts: bool = Field(
        False, title="Starter counts", description="With two or more approvals needed: whether the person who started the run may be one of them."
    )
    reject_reasons: list[str] = Field(
        default_factory=list, max_length=20, title="Rejection reasons",
        description="Reasons a rejection must choose from (written to the output as 'reason', so a condition can route on it); empty = free text only.",
    )  # fmt: skip
    edit_schema: dict[str, Any] | None = Field(
        None, title="Editable values",
        description="A JSON Schema (type object) of state keys the approver may change when approving (an edited value replaces the key's value, also for a reducer key: later writes reduce onto it); leave empty for none.",
    )  # fmt: skip
    show_keys: list[str] = Field(default_factory=list, title="State shown", description="State keys shown to the approver; empty = the whole state.")
    deadline: str | None = Field(
        None, max_length=40, title="Deadline",
        description="How long the request may wait for a decision, such as 30m, 4h, 2d or 1h30m; leave empty for no deadline.",
    )  # fmt: skip
    escalation: Literal["notify", "reassign", "timeout"] = Field(
        "notify", title="When the deadline passes",
        description="notify: email the approvers again; reassign: give the request to the user or group below; timeout: follow the node's 'timeout' edge.",
    )  # fmt: skip
    escalate_to_user: str | None = Field(None, max_length=150, title="Reassign to user", description="With escalation 'reassign': the username it goes to.")
    escalate_to_group: str | None = Field(None, max_length=150, title="Reassign to group", description="With escalation 'reassign': the group it goes to.")

    def deadline_seconds(self) -> float | None:
        """The deadline in seconds, or None without one (or one that does not parse:
        validation refuses those before a run starts)."""
        if not self.deadline:
            return None
        try:
            return parse_duration(self.deadline)
        except ValueError:
            return None


class ApprovalNode(NodeKind[ApprovalConfig]):
    """Commits an approval request and sets the run waiting; routes ``approved`` or
    ``rejected`` on the decision. An unwired ``rejected`` fails the run."""

    kind = "approval"
    config_model = ApprovalConfig
    dynamic_handles: ClassVar[bool] = True  # "timeout" with a deadline that follows it
    uses_repeat_safe: ClassVar[bool] = False  # its request is created in the commit: safe to repeat
    description = "Wait for a person to approve or reject (minutes or weeks)."
    title, category = "Approval", "human"  # builder palette (builder.selectors.node_kind_catalogue)

    def output_handles(self, config: ApprovalConfig) -> list[str]:
        """``approved``, ``rejected``, and ``timeout`` when a deadline follows it (it must
        then be wired: validation's ``unwired_handle`` on ``handles.timeout``)."""
        if config.deadline and config.escalation == TIMEOUT:
            return [APPROVED, REJECTED, TIMEOUT]
        return [APPROVED, REJECTED]

    def optional_handles(self, config: ApprovalConfig) -> set[str]:
        return {REJECTED}

    def writes(self, config: ApprovalConfig) -> set[str]:
        return {config.output_key} | set(editable_keys(config))

    def check(self, node_id: str, config: ApprovalConfig, known_names: set[str]) -> list[Issue]:
        """The prompt template parses and names only known variables; rejection reasons
        are distinct non-empty short texts; ``edit_schema`` is a valid JSON Schema of type
        object whose properties are state-key names; a quorum that the named approvers alone
        (no groups) could never reach is refused, since such a gate waits until someone
        reassigns or cancels it."""
        issues = check_template(node_id, "config.prompt", config.prompt, known_names)
        named = len(set(config.approvers))
        if named and not config.approver_groups and config.quorum > named:
            issues.append(Issue(
                node_id, "config.quorum",
                f"needs {config.quorum} approvals but only {named} approver{'s are' if named != 1 else ' is'} named: "
                "name more approvers, add an approver group, or lower it",
                "quorum_unreachable",
            ))
        for i, reason in enumerate(config.reject_reasons):
            if not reason.strip() or len(reason) > 100:
                issues.append(Issue(node_id, f"config.reject_reasons[{i}]", "a reason is 1 to 100 characters", "invalid_reason"))
        if len(set(config.reject_reasons)) != len(config.reject_reasons):
            issues.append(Issue(node_id, "config.reject_reasons", "reasons must be distinct", "invalid_reason"))
        if config.edit_schema is not None:
            issues.extend(_check_edit_schema(node_id, config.edit_schema))
        issues.extend(_check_deadline(node_id, config))
        return issues

    def execute(self, config: ApprovalConfig, ctx: NodeContext) -> NodeResult:
        """Render the prompt and wait. Raises NodeError(code="template", not retryable)."""
        from runs.sandbox.templating import render_template  # not at import: see _lazy_imports_note

        try:
            prompt = render_template(config.prompt, expression_names(ctx))
        except ExpressionError as exc:
            raise NodeError(f"approval prompt: {exc.message}", code="template", retryable=False) from None
        payload: dict[str, Any] = {"prompt": prompt, "approvers": config.approvers, "approver_groups": config.approver_groups, "quorum": config.quorum}
        due = config.deadline_seconds()
        if due is not None:
            payload |= {"deadline": config.deadline, "escalation": config.escalation}
        return NodeResult(output={"prompt": prompt}, wait=Wait("approval", payload, due_seconds=due))

    def on_wait(self, *, run: Any, step: Any, wait: Wait) -> None:
        ApprovalRequest.objects.create(
            run_id=run.pk,
            step_id=step.pk,
            node_id=step.node_id,
            purpose="gate",
            prompt=wait.payload.get("prompt", ""),
            payload=wait.payload,
            approvers=wait.payload.get("approvers", []),
            approver_groups=wait.payload.get("approver_groups", []),
            quorum=wait.payload.get("quorum", 1),
            due_at=getattr(step, "due_at", None) if wait.due_seconds else None,
            escalation=wait.payload.get("escalation", "") if wait.due_seconds else "",
        )  # approvals.services emails its approvers once it commits (post_save)

    def on_due(self, config: ApprovalConfig, *, run: Any, step: Any, now: Any) -> DueOutcome | None:
        """The deadline passed with the request still pending (inside the engine's
        transaction, run row locked: no decision can land in between). ``timeout``: the
        request expires (``expired``, decided by ``deadline``) and the gate's result
        ``{"decision": "timeout", "by": "deadline", "approvers": [who had approved]}`` goes
        to ``output_key`` down the ``timeout`` edge. ``reassign``: the request goes to
        ``escalate_to_user`` or ``escalate_to_group`` (claim cleared, version bumped, the
        new approvers emailed after commit). ``notify``: everyone who may decide it is
        emailed again. Returns None when no pending request is left (nothing to do)."""
        request = ApprovalRequest.objects.select_for_update().filter(step_id=step.pk, purpose="gate", status=ApprovalStatus.PENDING).first()
        if request is None:
            return None
        bump = {"version": request.version + 1, "escalated_at": now}
        pending = ApprovalRequest.objects.filter(pk=request.pk, status=ApprovalStatus.PENDING)
        if config.escalation == TIMEOUT:
            voters = list(request.votes.values_list("user_name", flat=True))
            pending.update(
                status=ApprovalStatus.EXPIRED, decision=TIMEOUT, decided_by_name="deadline", decided_at=now,
                last_change=f"timed out: its {config.deadline} deadline passed", **bump,
            )  # fmt: skip
            record: dict[str, Any] = {"decision": TIMEOUT, "comment": "", "by": "deadline", "reason": "", "approvers": voters}
            result = NodeResult(updates={config.output_key: record}, output=record, route=[TIMEOUT])
            return DueOutcome(TIMEOUT, result, {"approval": request.pk, "deadline": config.deadline})
        if config.escalation == "reassign":
            users = [config.escalate_to_user] if config.escalate_to_user else []
            groups = [config.escalate_to_group] if config.escalate_to_group and not users else []
            target = f"user {users[0]}" if users else f"group {groups[0]}"
            pending.update(
                approvers=users, approver_groups=groups, principals=principals_text(users, groups),
                claimed_by=None, claimed_by_name="", claimed_at=None,
                last_change=f"reassigned to {target}: its {config.deadline} deadline passed", **bump,
            )  # fmt: skip
            notify_on_commit(request, overdue=True)
            return DueOutcome("reassign", None, {"approval": request.pk, "to": target, "deadline": config.deadline})
        # notify: a reminder changes nothing a decider relies on, so the version stays.
        pending.update(escalated_at=now, last_change=f"overdue: its {config.deadline} deadline passed; approvers emailed again")
        notify_on_commit(request, overdue=True)
        return DueOutcome("notify", None, {"approval": request.pk, "deadline": config.deadline})

    def decision_result(
        self,
        config: ApprovalConfig,
        *,
        approved: bool,
        comment: str,
        by: str,
        wired_handles: Iterable[str],
        reason: str = "",
        values: dict[str, Any] | None = None,
        approvers: list[str] | None = None,
    ) -> NodeResult | None:
        """The waiting step's result for a decision: ``{"decision": "approved"|"rejected",
        "comment", "by", "reason", "approvers"}`` (plus ``values`` when the approver edited
        them) written to ``output_key`` and recorded as the output, routed down the handle
        of that name; edited ``values`` (already checked against ``edit_schema``) are also
        written to their state keys, as the keys' values (``NodeResult.sets``: a reducer
        key, such as an ``append`` list, takes the edited value, not one more item).
        ``reason``: the rejection reason (one of
        ``reject_reasons``, or ""). ``approvers``: everyone whose approval counted (default
        ``[by]``). ``wired_handles``: the source handles of the node's outgoing edges.
        Returns None for a rejection when ``rejected`` is not wired: the run then fails
        (there is nowhere to go)."""
        if not approved and REJECTED not in set(wired_handles):
            return None
        verdict = APPROVED if approved else REJECTED
        record: dict[str, Any] = {"decision": verdict, "comment": comment, "by": by, "reason": reason, "approvers": approvers if approvers is not None else [by]}
        updates: dict[str, Any] = {}
        if approved and values:
            record["values"] = values
            updates.update(values)
        updates[config.output_key] = record
        return NodeResult(updates=updates, output=record, route=[verdict], sets=frozenset(values or ()) if approved else frozenset())


def editable_keys(config: ApprovalConfig) -> list[str]:
    """The state keys an approver may edit (the properties of ``edit_schema``), sorted."""
    props = (config.edit_schema or {}).get("properties")
    return sorted(props) if isinstance(props, dict) else []


def edit_errors(config: ApprovalConfig, values: Any) -> dict[str, list[str]]:
    """Field errors (``values.<path>`` -> messages) of edited ``values`` against the
    node's ``edit_schema``; ``{"values": [...]}`` when the node allows no edits or a key
    is not one of its properties. Empty when the values are acceptable."""
    if config.edit_schema is None:
        return {"values": ["this approval does not allow edited values"]}
    if not isinstance(values, dict):
        return {"values": ["must be a JSON object"]}
    allowed = set(editable_keys(config))
    extra = sorted(set(values) - allowed)
    if extra:
        return {"values": [f"not editable here: {', '.join(extra)} (editable: {', '.join(sorted(allowed)) or 'none'})"]}
    schemas = _schemas()
    errors: dict[str, list[str]] = {}
    try:
        found = schemas.errors(config.edit_schema, values)  # local $refs only: nothing is fetched
    except schemas.SchemaUnusable as exc:  # a version stored before validation refused it
        return {"values": [f"this approval's edit_schema cannot be applied: {exc}"]}
    for err in found:
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        errors.setdefault(f"values{path}", []).append(err.message)
    return errors


def _schemas() -> Any:
    """runs.sandbox.schemas, imported on first use (not at import: see _lazy_imports_note)."""
    from runs.sandbox import schemas  # not at import: see _lazy_imports_note

    return schemas


def _check_edit_schema(node_id: str, schema: dict[str, Any]) -> list[Issue]:
    schemas = _schemas()
    field = "config.edit_schema"
    problems = schemas.schema_problems(schema)  # not valid, or a remote or dangling $ref
    if problems:
        return [Issue(node_id, f"{field}.{where}" if where else field, why, "invalid_schema") for where, why in problems]
    props = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(props, dict) or not props:
        return [Issue(node_id, field, "must be a schema of type object with at least one property (the state keys an approver may edit)", "invalid_schema")]
    bad = [k for k in props if not re.match(STATE_KEY_PATTERN, k)]
    if bad:
        return [Issue(node_id, field, f"property names must be state-key names: {', '.join(sorted(bad))}", "invalid_schema")]
    return []


def _check_deadline(node_id: str, config: ApprovalConfig) -> list[Issue]:
    """A deadline parses and lies between 1 s and 366 days; ``reassign`` names exactly one
    user or group; ``timeout`` has a deadline to follow (its edge: ``handles.timeout``)."""
    issues: list[Issue] = []
    if config.deadline:
        try:
            parse_duration(config.deadline)
        except ValueError as exc:
            issues.append(Issue(node_id, "config.deadline", str(exc), "invalid_deadline"))
    elif config.escalation == TIMEOUT:
        issues.append(Issue(node_id, "config.deadline", "escalation 'timeout' needs a deadline to follow its timeout edge", "invalid_deadline"))
    if config.escalation == "reassign":
        if bool(config.escalate_to_user) == bool(config.escalate_to_group):
            issues.append(Issue(node_id, "config.escalate_to_user", "escalation 'reassign' needs exactly one of a user or a group to reassign to", "invalid_deadline"))
        if not config.deadline:
            issues.append(Issue(node_id, "config.deadline", "escalation 'reassign' needs a deadline", "invalid_deadline"))
    elif config.escalate_to_user or config.escalate_to_group:
        issues.append(Issue(node_id, "config.escalation", "a user or group to reassign to goes with escalation 'reassign'", "invalid_deadline"))
    return issues
