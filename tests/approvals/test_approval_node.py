"""The approval kind owns its handles, its defaults and what a decision writes (no database)."""
from __future__ import annotations

import pytest

from approvals.nodes import APPROVED, REJECTED, ApprovalNode
from runs.nodes.base import NodeContext
from runs.vocabulary import NodeError

KIND = ApprovalNode()


def ctx(state: dict, run_input: dict) -> NodeContext:
    return NodeContext(
        run_id=1, run_uuid="u", step_id=2, node_id="gate", iteration=0, attempt=1,
        idempotency_key="k", state=state, run_input=run_input,
    )


def test_defaults_and_handles_come_from_the_config_model():
    config = KIND.config_model.model_validate({})
    assert (config.prompt, config.output_key) == ("Approve?", "approval")
    assert KIND.output_handles(config) == [APPROVED, REJECTED] and KIND.optional_handles(config) == {REJECTED}
    assert KIND.writes(KIND.config_model.model_validate({"output_key": "verdict"})) == {"verdict"}


@pytest.mark.parametrize("approved", [True, False])
def test_a_decision_writes_output_key_and_routes_by_its_handle(approved):
    config = KIND.config_model.model_validate({"output_key": "verdict"})
    result = KIND.decision_result(config, approved=approved, comment="ok", by="ada", wired_handles=[APPROVED, REJECTED])
    verdict = APPROVED if approved else REJECTED
    record = {"decision": verdict, "comment": "ok", "by": "ada", "reason": "", "approvers": ["ada"]}
    assert result is not None
    assert (result.updates, result.output, result.route) == ({"verdict": record}, record, [verdict])


def test_a_rejection_without_a_rejected_edge_has_nowhere_to_go():
    config = KIND.config_model.model_validate({})
    assert KIND.decision_result(config, approved=False, comment="", by="ada", wired_handles=[APPROVED]) is None
    assert KIND.decision_result(config, approved=True, comment="", by="ada", wired_handles=[APPROVED]) is not None


def test_the_prompt_sees_the_state_and_the_run_input_as_validation_says():
    config = KIND.config_model.model_validate({"prompt": "Refund {{ input.order_id }} for {{ amount }}?"})
    assert KIND.check("gate", config, {"input", "amount"}) == []
    result = KIND.execute(config, ctx({"amount": 12}, {"order_id": "A-1"}))
    assert result.output == {"prompt": "Refund A-1 for 12?"} and result.wait is not None
    assert result.wait.payload["prompt"] == "Refund A-1 for 12?"


def test_prompt_errors_use_the_template_codes_of_every_kind():
    issues = KIND.check("gate", KIND.config_model.model_validate({"prompt": "{{ nope }} {% if %}"}), set())
    assert [(i.field, i.code) for i in issues] == [("config.prompt", "invalid_template")]
    issues = KIND.check("gate", KIND.config_model.model_validate({"prompt": "{{ nope }}"}), set())
    assert [(i.field, i.code, i.message) for i in issues] == [("config.prompt", "unknown_variable", "unknown variable 'nope': declare 'nope' in Graph settings → State keys, or use input.nope")]
    with pytest.raises(NodeError) as info:
        KIND.execute(KIND.config_model.model_validate({"prompt": "{{ nope }}"}), ctx({}, {}))
    assert (info.value.code, info.value.retryable) == ("template", False)


def test_edited_values_are_checked_against_the_schema_and_written_to_state():
    from approvals.nodes import edit_errors

    schema = {"type": "object", "properties": {"amount": {"type": "number", "maximum": 100}}}
    config = KIND.config_model.model_validate({"edit_schema": schema})
    assert KIND.writes(config) == {"approval", "amount"}
    assert edit_errors(config, {"amount": 50}) == {}
    assert edit_errors(config, {"amount": 500}) == {"values.amount": ["500 is greater than the maximum of 100"]}
    assert "not editable here: other" in edit_errors(config, {"other": 1})["values"][0]
    assert edit_errors(KIND.config_model.model_validate({}), {"amount": 1}) == {"values": ["this approval does not allow edited values"]}
    result = KIND.decision_result(config, approved=True, comment="", by="ada", wired_handles=[APPROVED], values={"amount": 50})
    assert result is not None and result.updates["amount"] == 50 and result.updates["approval"]["values"] == {"amount": 50}


def test_bad_reasons_and_edit_schemas_are_issues():
    config = KIND.config_model.model_validate({"reject_reasons": ["too high", "too high", " "], "edit_schema": {"type": "string"}})
    codes = [(i.field, i.code) for i in KIND.check("gate", config, set())]
    assert ("config.reject_reasons[2]", "invalid_reason") in codes and ("config.reject_reasons", "invalid_reason") in codes
    assert ("config.edit_schema", "invalid_schema") in codes
    bad_key = KIND.config_model.model_validate({"edit_schema": {"type": "object", "properties": {"not a key": {}}}})
    assert [i.code for i in KIND.check("gate", bad_key, set())] == ["invalid_schema"]
