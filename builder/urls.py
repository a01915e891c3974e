"""Graph and builder API routes (mounted at /api/v1/)."""
from django.urls import path

from builder import apis

urlpatterns = [
    path("graphs/", apis.GraphCollectionApi.as_view(), name="graphs"),
    path("graphs/validate/", apis.GraphValidateApi.as_view(), name="graphs-validate"),
    path("graphs/import/", apis.GraphImportApi.as_view(), name="graphs-import"),
    path("graphs/<int:graph_id>/", apis.GraphDetailApi.as_view(), name="graph"),
    path("graphs/<int:graph_id>/export/", apis.GraphExportApi.as_view(), name="graph-export"),
    path("graphs/<int:graph_id>/versions/", apis.GraphVersionCollectionApi.as_view(), name="graph-versions"),
    path("graphs/<int:graph_id>/publish-check/", apis.GraphPublishCheckApi.as_view(), name="graph-publish-check"),
    path("graphs/<int:graph_id>/versions/<int:number>/", apis.GraphVersionDetailApi.as_view(), name="graph-version"),
    path("graphs/<int:graph_id>/versions/<int:number>/restore/", apis.GraphVersionRestoreApi.as_view(), name="graph-version-restore"),
    path("graphs/<int:graph_id>/diff/", apis.GraphVersionDiffApi.as_view(), name="graph-diff"),
    path("graphs/<int:graph_id>/duplicate/", apis.GraphDuplicateApi.as_view(), name="graph-duplicate"),
    path("graphs/<int:graph_id>/nodes/<str:node_id>/test/", apis.GraphNodeTestApi.as_view(), name="graph-node-test"),
    path("graphs/<int:graph_id>/draft/run/", apis.GraphDraftRunApi.as_view(), name="graph-draft-run"),
    path("graphs/<int:graph_id>/draft/pins/<str:node_id>/", apis.GraphPinApi.as_view(), name="graph-draft-pin"),
    path("graphs/<int:graph_id>/draft/preview/", apis.GraphPreviewApi.as_view(), name="graph-draft-preview"),
    path("node-kinds/", apis.NodeKindListApi.as_view(), name="node-kinds"),
    path("tools/", apis.ToolListApi.as_view(), name="tools"),
    path("models/", apis.ModelListApi.as_view(), name="models"),
    path("expressions/check/", apis.ExpressionCheckApi.as_view(), name="expressions-check"),
]
