"""Approval API routes (mounted at /api/v1/)."""
from django.urls import path

from approvals import apis

urlpatterns = [
    path("approvals/", apis.ApprovalMineApi.as_view(), name="approvals-mine"),
    path("approvals/all/", apis.ApprovalAllApi.as_view(), name="approvals-all"),
    path("approvals/<int:approval_id>/", apis.ApprovalDetailApi.as_view(), name="approval"),
    path("approvals/<int:approval_id>/decide/", apis.ApprovalDecideApi.as_view(), name="approval-decide"),
]
