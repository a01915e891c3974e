"""Graph API routes (mounted at /api/v1/)."""
from django.urls import path

from builder import apis

urlpatterns = [
    path("graphs/", apis.GraphCollectionApi.as_view(), name="graphs"),
    path("graphs/validate/", apis.GraphValidateApi.as_view(), name="graphs-validate"),
    path("graphs/import/", apis.GraphImportApi.as_view(), name="graphs-import"),
    path("graphs/<int:graph_id>/", apis.GraphDetailApi.as_view(), name="graph"),
    path("graphs/<int:graph_id>/export/", apis.GraphExportApi.as_view(), name="graph-export"),
    path("graphs/<int:graph_id>/versions/", apis.GraphVersionCollectionApi.as_view(), name="graph-versions"),
    path("graphs/<int:graph_id>/versions/<int:number>/", apis.GraphVersionDetailApi.as_view(), name="graph-version"),
    path("graphs/<int:graph_id>/diff/", apis.GraphVersionDiffApi.as_view(), name="graph-diff"),
]
