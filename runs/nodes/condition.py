"""The condition node kind: routes a run down exactly one handle chosen by expressions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runs.nodes.base import Issue, NodeConfig, NodeContext, NodeKind, NodeResult
from runs.nodes.shared import check_expression, expression_names
from runs.sandbox.expressions import ExpressionError, evaluate
from runs.sandbox.values import InvalidValue, canonical
from runs.vocabulary import NodeError

HANDLE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_\-]{0,63}$"
DEFAULT_HANDLE = "default"


class Case(BaseModel):
    """One branch of a multi-way condition: taken when its expression is true."""

    model_config = ConfigDict(extra="forbid")

    handle: str = Field(pattern=HANDLE_PATTERN, title="Handle", description="The outgoing handle taken when the expression is true.")
    expression: str = Field(title="Expression", description="Expression over the state; when true, this case is taken.")


class ConditionConfig(NodeConfig):
    """Either ``expression`` (handles ``true``/``false``) or ``cases`` (each case's handle,
    plus ``default`` when no case is true). The first true case wins."""

    expression: str | None = Field(
        default=None, title="Expression", description="Two-way condition: takes the handle 'true' or 'false'."
    )
    cases: list[Case] | None = Field(
        default=None,
        min_length=1,
        title="Cases",
        description="Multi-way condition: first true case wins; 'default' when none is true.",
    )

    @model_validator(mode="after")
    def _exactly_one_mode(self) -> ConditionConfig:
        if (self.expression is None) == (self.cases is None):
            raise ValueError("set exactly one of 'expression' or 'cases'")
        return self


class ConditionNode(NodeKind[ConditionConfig]):
    """Evaluates its expression(s) and takes exactly one handle; every handle must be wired
    (validation), so a run never stops at a condition with nowhere to go."""

    kind: ClassVar[str] = "condition"
    config_model = ConditionConfig
    uses_repeat_safe: ClassVar[bool] = False  # nothing outside the run: always safe to repeat
    description: ClassVar[str] = "Branch on an expression (true/false) or on cases (first true wins, else default)."
    title, category = "Condition", "logic"  # builder palette (builder.selectors.node_kind_catalogue)
    dynamic_handles = True

    def output_handles(self, config: ConditionConfig) -> list[str] | None:
        if config.cases is None:
            return ["true", "false"]
        return list(dict.fromkeys([case.handle for case in config.cases] + [DEFAULT_HANDLE]))

    def check(self, node_id: str, config: ConditionConfig, known_names: set[str]) -> list[Issue]:
        """Expressions parse and name known variables; case handles are unique and not ``default``."""
        if config.cases is None:
            return check_expression(node_id, "config.expression", config.expression or "", known_names)
        issues: list[Issue] = []
        seen: set[str] = set()
        for i, case in enumerate(config.cases):
            if case.handle == DEFAULT_HANDLE:
                issues.append(
                    Issue(
                        node_id,
                        f"config.cases[{i}].handle",
                        "'default' is reserved for the no-case-matched handle",
                        "duplicate_handle",
                    )
                )
            elif case.handle in seen:
                issues.append(
                    Issue(
                        node_id,
                        f"config.cases[{i}].handle",
                        f"handle '{case.handle}' is used by an earlier case",
                        "duplicate_handle",
                    )
                )
            seen.add(case.handle)
            issues.extend(check_expression(node_id, f"config.cases[{i}].expression", case.expression, known_names))
        return issues

    def choose(self, config: ConditionConfig, ctx: NodeContext) -> str:
        """The handle to take. Raises NodeError(code="expression", retryable=False)."""
        names = expression_names(ctx)
        if config.cases is None:
            return "true" if self._truth(config.expression or "", names, "expression") else "false"
        for i, case in enumerate(config.cases):
            if self._truth(case.expression, names, f"cases[{i}] ({case.handle})"):
                return case.handle
        return DEFAULT_HANDLE

    @staticmethod
    def _truth(source: str, names: Mapping[str, Any], where: str) -> bool:
        """Whether ``source`` is true over ``names``: a boolean as it is; any other JSON
        value by JSON truthiness (``None``, ``0``, ``""``, ``[]``, ``{}`` are false).

        A value a transform could not store either (NaN, an infinity, a set, a complex
        number, nested anywhere in the value) fails the step like a transform's does,
        rather than routing by Python's truthiness (NaN is "true" there). Raises
        NodeError(code="expression", retryable=False); ``details.reason`` says why.
        """
        try:
            value = evaluate(source, names)
        except ExpressionError as exc:
            raise NodeError(
                f"condition {where} failed: {exc.message}",
                code="expression",
                retryable=False,
                details={"expression": source, "error_code": exc.code},
            ) from exc
        if type(value) is bool:
            return value
        try:
            value = canonical(value, "value")
        except InvalidValue as exc:
            raise NodeError(
                f"condition {where} failed: its {exc}; a condition takes true/false or a JSON value",
                code="expression",
                retryable=False,
                details={"expression": source, "error_code": "invalid_value", **exc.as_dict()},
            ) from exc
        return bool(value)

    def execute(self, config: ConditionConfig, ctx: NodeContext) -> NodeResult:
        """Route down the chosen handle; the handle is also the step's recorded output."""
        handle = self.choose(config, ctx)
        return NodeResult(route=[handle], output={"handle": handle})
