"""Approval API views: my pending requests, every request (admins), one request, decide."""
from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from accounts import policy
from accounts.authentication import IsAdmin
from approvals import selectors, services
from approvals.serializers import ApprovalDecideInput, ApprovalListQueryInput, ApprovalOutput
from ballast.api import PAGE_PARAMETERS, ApiView, paginated

TAG = ["approvals"]

ALREADY_DECIDED = inline_serializer(
    name="AlreadyDecidedBody",
    fields={
        "error": inline_serializer(
            name="AlreadyDecidedError",
            fields={
                "code": serializers.CharField(),
                "message": serializers.CharField(),
                "fields": serializers.DictField(child=serializers.ListField(child=serializers.CharField())),
                "decided_by": serializers.CharField(allow_null=True),
                "decided_at": serializers.CharField(allow_null=True),
                "status": serializers.CharField(),
            },
        )
    },
)


class ApprovalMineApi(ApiView):
    """GET: the requests the caller may decide (default: pending), newest first."""

    @extend_schema(tags=TAG, operation_id="approvals_mine", parameters=[ApprovalListQueryInput, *PAGE_PARAMETERS], responses=paginated(ApprovalOutput, "Approval"))
    def get(self, request: Any) -> Response:
        q = self.validated(ApprovalListQueryInput, request.query_params)
        return self.paginate(selectors.approval_list_for_user(user=request.user, status=q["status"]), ApprovalOutput)


class ApprovalAllApi(ApiView):
    """GET: every request (default: pending), newest first (admins)."""

    permission_classes = ApiView.permission_classes + [IsAdmin]

    @extend_schema(tags=TAG, operation_id="approvals_all", parameters=[ApprovalListQueryInput, *PAGE_PARAMETERS], responses=paginated(ApprovalOutput, "Approval"))
    def get(self, request: Any) -> Response:
        q = self.validated(ApprovalListQueryInput, request.query_params)
        return self.paginate(selectors.with_may_decide(selectors.approval_list(status=q["status"]), user=request.user), ApprovalOutput)


class ApprovalDetailApi(ApiView):
    """GET: one request (404 when the caller may not read its run)."""

    @extend_schema(tags=TAG, operation_id="approvals_read", responses=ApprovalOutput)
    def get(self, request: Any, approval_id: int) -> Response:
        approval = selectors.approval_get(approval_id=approval_id)
        policy.require_read(request.user, approval.run, action="approval.read", obj=approval)
        return Response(ApprovalOutput(approval, context={"request": request}).data)


class ApprovalDecideApi(ApiView):
    """POST: decide a request the caller may decide. One transaction records the
    decision, audits it and resumes the run; of two concurrent decisions one wins and
    the other gets 409 naming who decided. 404 when the caller may not read its run,
    403 when they may read it but it is not theirs to decide (both audited)."""

    @extend_schema(
        tags=TAG,
        operation_id="approvals_decide",
        request=ApprovalDecideInput,
        responses={200: ApprovalOutput, 409: OpenApiResponse(ALREADY_DECIDED, description="Already decided (by whom, when).")},
    )
    def post(self, request: Any, approval_id: int) -> Response:
        policy.require_decide(request.user, selectors.approval_get(approval_id=approval_id))  # 404/403 before 400
        data = self.validated(ApprovalDecideInput, request.data)
        decided = services.approval_decide(
            approval_id=approval_id, decision=data["decision"], user=request.user, comment=data["comment"], output=data["output"]
        )
        return Response(ApprovalOutput(selectors.approval_get(approval_id=decided.pk), context={"request": request}).data)
