"""Approval API routes (mounted at /api/v1/)."""
from django.urls import path

from approvals import apis

urlpatterns = [
    path("approvals/", apis.ApprovalMineApi.as_view(), name="approvals-mine"),
    path("approvals/inbox/", apis.ApprovalInboxApi.as_view(), name="approvals-inbox"),
    path("approvals/inbox/counts/", apis.ApprovalInboxCountsApi.as_view(), name="approvals-inbox-counts"),
    path("approvals/claim/", apis.ApprovalClaimManyApi.as_view(), name="approvals-claim-many"),
    path("approvals/<int:approval_id>/claim/", apis.ApprovalClaimApi.as_view(), name="approval-claim"),
    path("approvals/<int:approval_id>/hand-back/", apis.ApprovalHandBackApi.as_view(), name="approval-hand-back"),
    path("approvals/<int:approval_id>/reassign/", apis.ApprovalReassignApi.as_view(), name="approval-reassign"),
    path("approvals/of-run/<int:run_id>/", apis.RunApprovalsApi.as_view(), name="approvals-of-run"),
    path("approvals/all/", apis.ApprovalAllApi.as_view(), name="approvals-all"),
    path("approvals/<int:approval_id>/", apis.ApprovalDetailApi.as_view(), name="approval"),
    path("approvals/<int:approval_id>/decide/", apis.ApprovalDecideApi.as_view(), name="approval-decide"),
]
