"""Approval API views: my pending requests, every request (admins), one request, decide."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from accounts import policy
from accounts.authentication import IsAdmin
from approvals import selectors, services
from approvals.models import ApprovalStatus
from approvals.serializers import (
    ApprovalClaimManyInput,
    ApprovalDecideInput,
    ApprovalListQueryInput,
    ApprovalOutput,
    ApprovalReassignInput,
    ClaimManyOutput,
    InboxCountsOutput,
    InboxQueryInput,
    RunApprovalOutput,
)
from core.api import PAGE_PARAMETERS, ApiView, paginated
from runs.models import RunStateKey
from runs.selectors import run_get

TAG = ["approvals"]

CONFLICT = inline_serializer(
    name="ApprovalConflictBody",
    fields={
        "error": inline_serializer(
            name="ApprovalConflictError",
            fields={
                "code": serializers.CharField(help_text="already_decided, changed, action_changed, claimed, already_voted, not_claimed"),
                "message": serializers.CharField(),
                "fields": serializers.DictField(child=serializers.ListField(child=serializers.CharField())),
                "decided_by": serializers.CharField(allow_null=True, required=False),
                "by": serializers.CharField(allow_null=True, required=False),
                "status": serializers.ChoiceField(choices=ApprovalStatus.choices, required=False),
                "version": serializers.CharField(allow_null=True, required=False),
            },
        )
    },
)


class ApprovalInboxApi(ApiView):
    """GET: one list of the caller's inbox (``list``: assigned, group, decided), with search ``q``."""

    @extend_schema(tags=TAG, operation_id="approvals_inbox", parameters=[InboxQueryInput, *PAGE_PARAMETERS], responses=paginated(ApprovalOutput, "InboxApproval"))
    def get(self, request: Any) -> Response:
        q = self.validated(InboxQueryInput, request.query_params)
        return self.paginate(selectors.inbox_list(user=request.user, which=q["list"], search=q["q"]), ApprovalOutput, prepare=hold_run_states)


class ApprovalInboxCountsApi(ApiView):
    """GET: the size of each inbox list (with search ``q``) and how many wait for the caller."""

    @extend_schema(tags=TAG, operation_id="approvals_inbox_counts", parameters=[InboxQueryInput], responses=InboxCountsOutput)
    def get(self, request: Any) -> Response:
        q = self.validated(InboxQueryInput, request.query_params)
        return Response(selectors.inbox_counts(user=request.user, search=q["q"]))


def _detail(request: Any, approval_id: int) -> Response:
    return Response(ApprovalOutput(selectors.approval_get(approval_id=approval_id), context={"request": request}).data)


class ApprovalClaimApi(ApiView):
    """POST: claim a request (only the claimer may then decide it). 409 when someone else holds it or it was decided."""

    @extend_schema(tags=TAG, operation_id="approvals_claim", request=None, responses={200: ApprovalOutput, 409: OpenApiResponse(CONFLICT)})
    def post(self, request: Any, approval_id: int) -> Response:
        policy.require_decide(request.user, selectors.approval_get(approval_id=approval_id))
        services.approval_claim(approval_id=approval_id, user=request.user)
        return _detail(request, approval_id)


class ApprovalHandBackApi(ApiView):
    """POST: give a claimed request back to its group (its claimer or an admin)."""

    @extend_schema(tags=TAG, operation_id="approvals_hand_back", request=None, responses={200: ApprovalOutput, 409: OpenApiResponse(CONFLICT)})
    def post(self, request: Any, approval_id: int) -> Response:
        approval = selectors.approval_get(approval_id=approval_id)
        policy.require_read(request.user, approval.run, action="approval.hand_back", obj=approval)
        services.approval_hand_back(approval_id=approval_id, user=request.user)
        return _detail(request, approval_id)


class ApprovalClaimManyApi(ApiView):
    """POST ``{"ids": [...]}``: claim several requests; each is claimed or refused on its own."""

    @extend_schema(tags=TAG, operation_id="approvals_claim_many", request=ApprovalClaimManyInput, responses=ClaimManyOutput)
    def post(self, request: Any) -> Response:
        data = self.validated(ApprovalClaimManyInput, request.data)
        return Response(services.approval_claim_many(approval_ids=data["ids"], user=request.user))


class ApprovalReassignApi(ApiView):
    """POST: give a request to one user or group (operators of its graph, admins)."""

    @extend_schema(tags=TAG, operation_id="approvals_reassign", request=ApprovalReassignInput, responses={200: ApprovalOutput, 409: OpenApiResponse(CONFLICT)})
    def post(self, request: Any, approval_id: int) -> Response:
        policy.require_reassign(request.user, selectors.approval_get(approval_id=approval_id))
        data = self.validated(ApprovalReassignInput, request.data)
        services.approval_reassign(
            approval_id=approval_id, user=request.user, to_user=data["to_user"], to_group=data["to_group"], version=data["version"], comment=data["comment"]
        )
        return _detail(request, approval_id)


class ApprovalMineApi(ApiView):
    """GET: the requests the caller may decide (default: pending), newest first."""

    @extend_schema(tags=TAG, operation_id="approvals_mine", parameters=[ApprovalListQueryInput, *PAGE_PARAMETERS], responses=paginated(ApprovalOutput, "Approval"))
    def get(self, request: Any) -> Response:
        q = self.validated(ApprovalListQueryInput, request.query_params)
        return self.paginate(selectors.approval_list_for_user(user=request.user, status=q["status"]), ApprovalOutput, prepare=hold_run_states)


class ApprovalAllApi(ApiView):
    """GET: every request (default: pending), newest first (admins)."""

    permission_classes = ApiView.permission_classes + [IsAdmin]

    @extend_schema(tags=TAG, operation_id="approvals_all", parameters=[ApprovalListQueryInput, *PAGE_PARAMETERS], responses=paginated(ApprovalOutput, "Approval"))
    def get(self, request: Any) -> Response:
        q = self.validated(ApprovalListQueryInput, request.query_params)
        return self.paginate(selectors.with_may_decide(selectors.approval_list(status=q["status"]), user=request.user), ApprovalOutput, prepare=hold_run_states)


class ApprovalDetailApi(ApiView):
    """GET: one request (404 when the caller may not read its run)."""

    @extend_schema(tags=TAG, operation_id="approvals_read", responses=ApprovalOutput)
    def get(self, request: Any, approval_id: int) -> Response:
        approval = selectors.approval_get(approval_id=approval_id)
        policy.require_read(request.user, approval.run, action="approval.read", obj=approval)
        return Response(ApprovalOutput(approval, context={"request": request}).data)


class RunApprovalsApi(ApiView):
    """GET: the pending requests of one run (404 when the caller may not read it), so the
    run page can link a waiting step to the request that decides it."""

    @extend_schema(tags=TAG, operation_id="approvals_of_run", responses=RunApprovalOutput(many=True))
    def get(self, request: Any, run_id: int) -> Response:
        policy.require_read(request.user, run_get(run_id=run_id), action="approval.read")
        return Response(RunApprovalOutput(selectors.approval_pending_of_run(run_id=run_id, user=request.user), many=True).data)


class ApprovalDecideApi(ApiView):
    """POST: decide a request the caller may decide, as the ``version`` it was shown. One
    transaction records the decision (or a vote towards a quorum), audits it and resumes
    the run; of two concurrent decisions one wins and the other gets 409 naming who
    decided; a request claimed by someone else or changed since it was shown is 409 too. 404 when the caller may not read its run,
    403 when they may read it but it is not theirs to decide (both audited)."""

    @extend_schema(
        tags=TAG,
        operation_id="approvals_decide",
        request=ApprovalDecideInput,
        responses={200: ApprovalOutput, 409: OpenApiResponse(CONFLICT, description="Already decided (by whom, when), claimed by someone else, or changed since it was shown.")},
    )
    def post(self, request: Any, approval_id: int) -> Response:
        policy.require_decide(request.user, selectors.approval_get(approval_id=approval_id))  # 404/403 before 400
        data = self.validated(ApprovalDecideInput, request.data)
        decided = services.approval_decide(
            approval_id=approval_id, decision=data["decision"], user=request.user, comment=data["comment"], output=data["output"],
            version=data["version"], reason=data["reason"], values=data["values"],
        )  # fmt: skip
        return Response(ApprovalOutput(selectors.approval_get(approval_id=decided.pk), context={"request": request}).data)


def hold_run_states(page: list[Any]) -> None:
    """Read the state of every run on a page of approval requests in one query (the items
    render their next action and state from it)."""
    RunStateKey.hold_states(r.run for r in page)
