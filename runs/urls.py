"""Run, step, event, cost, audit, provider and MCP server API routes (mounted at /api/v1/)."""
from django.urls import path

from runs.api import actions as action_apis
from runs.api import apis
from runs.providers import apis as provider_apis
from runs.reports import apis as report_apis
from runs.tools.mcp_servers import apis as mcp_apis

urlpatterns = [
    path("runs/", apis.RunCollectionApi.as_view(), name="runs"),
    path("runs/compare/", action_apis.RunCompareApi.as_view(), name="runs-compare"),
    path("runs/cancel/", apis.RunBulkCancelApi.as_view(), name="runs-cancel"),
    path("runs/summary/", apis.RunSummaryApi.as_view(), name="runs-summary"),
    path("runs/<int:run_id>/", apis.RunDetailApi.as_view(), name="run"),
    path("runs/<int:run_id>/graph/", apis.RunGraphApi.as_view(), name="run-graph"),
    path("runs/<int:run_id>/actions/", action_apis.RunActionsApi.as_view(), name="run-actions"),
    path("runs/<int:run_id>/resume/preview/", action_apis.RunResumePreviewApi.as_view(), name="run-resume-preview"),
    path("runs/<int:run_id>/retry/preview/", action_apis.RunRetryPreviewApi.as_view(), name="run-retry-preview"),
    path("runs/<int:run_id>/fork/preview/", action_apis.RunForkPreviewApi.as_view(), name="run-fork-preview"),
    path("runs/<int:run_id>/cancel/", apis.RunCancelApi.as_view(), name="run-cancel"),
    path("runs/<int:run_id>/resume/", apis.RunResumeApi.as_view(), name="run-resume"),
    path("runs/<int:run_id>/retry/", apis.RunRetryApi.as_view(), name="run-retry"),
    path("runs/<int:run_id>/fork/", apis.RunForkApi.as_view(), name="run-fork"),
    path("runs/<int:run_id>/steps/", apis.RunStepListApi.as_view(), name="run-steps"),
    path("runs/<int:run_id>/events/", apis.RunEventListApi.as_view(), name="run-events"),
    path("steps/<int:step_id>/", apis.StepDetailApi.as_view(), name="step"),
    path("steps/<int:step_id>/state/", apis.StepStateApi.as_view(), name="step-state"),
    path("costs/", apis.CostListApi.as_view(), name="costs"),
    path("costs/totals/", report_apis.CostTotalsApi.as_view(), name="costs-totals"),
    path("costs/budgets/", report_apis.CostBudgetsApi.as_view(), name="costs-budgets"),
    path("costs/export/", report_apis.CostExportApi.as_view(), name="costs-export"),
    path("audit/", apis.AuditListApi.as_view(), name="audit"),
    path("audit/verify/", report_apis.AuditVerifyApi.as_view(), name="audit-verify"),
    path("audit/facets/", report_apis.AuditFacetsApi.as_view(), name="audit-facets"),
    path("audit/export/", report_apis.AuditExportApi.as_view(), name="audit-export"),
    path("workers/", report_apis.WorkersApi.as_view(), name="workers"),
    path("graphs/<int:graph_id>/alerts/", report_apis.RunAlertApi.as_view(), name="graph-alerts"),
    path("providers/", provider_apis.ProviderCollectionApi.as_view(), name="providers"),
    path("providers/<str:name>/", provider_apis.ProviderDetailApi.as_view(), name="provider"),
    path("providers/<str:name>/test/", provider_apis.ProviderTestApi.as_view(), name="provider-test"),
    path("mcp-servers/", mcp_apis.McpServerCollectionApi.as_view(), name="mcp-servers"),
    path("mcp-servers/<str:name>/", mcp_apis.McpServerDetailApi.as_view(), name="mcp-server"),
    path("mcp-servers/<str:name>/test/", mcp_apis.McpServerTestApi.as_view(), name="mcp-server-test"),
]
