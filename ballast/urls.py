"""Top-level URL routes: health probes, the browser app's pages, sign-in, admin, the REST API under /api/v1/, its schema and docs."""
from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerView

import runs.providers.admin  # noqa: F401  (registers the LLM provider admin before admin.site.urls is built)
from ballast import health, metrics, views
from core.api import api_not_found

api_v1 = [
    path("", include("builder.urls")),
    path("", include("runs.urls")),
    path("", include("approvals.urls")),
    path("", include("triggers.urls")),
    path("", include("accounts.urls")),
]

urlpatterns = [
    # Health probes: answered by ballast.health.HealthProbeMiddleware before host checks and
    # sessions; named here so reverse() and the URL list know them.
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("", views.home, name="home"),
    path("graphs/", views.graph_list, name="graphs-page"),
    path("graphs/<int:graph_id>/", views.graph_builder, name="graph-builder"),
    path("runs/", views.run_list, name="runs-page"),
    path("runs/compare/", views.run_compare, name="runs-compare-page"),
    path("runs/<int:run_id>/", views.run_detail, name="run-page"),
    path("approvals/", views.approval_inbox, name="approvals-page"),
    path("approvals/<int:approval_id>/", views.approval_inbox, name="approval-page"),
    path("costs/", views.costs, name="costs-page"),
    path("audit/", views.audit_log, name="audit-page"),
    path("workers/", views.workers, name="workers-page"),
    path("tokens/", views.tokens, name="tokens-page"),
    path("users/", views.users, name="users-page"),
    path("providers/", views.providers, name="providers-page"),
    path("mcp-servers/", views.mcp_servers, name="mcp-servers-page"),
    # Django's auth views for every user, staff or not: login, password change and password
    # reset with the app's page context (top bar, CSS) and templates; logout (POST only) as Django has it.
    path("accounts/login/", views.login, name="login"),
    path("accounts/password_change/", views.password_change, name="password_change"),
    path("accounts/password_change/done/", views.password_change_done, name="password_change_done"),
    path("accounts/password_reset/", views.password_reset, name="password_reset"),
    path("accounts/password_reset/done/", views.password_reset_done, name="password_reset_done"),
    path("accounts/reset/<uidb64>/<token>/", views.password_reset_confirm, name="password_reset_confirm"),
    path("accounts/reset/done/", views.password_reset_complete, name="password_reset_complete"),
    path("accounts/", include("django.contrib.auth.urls")),
    # Graphs moved from the builder app to graphs (graphs 0001): old admin links and
    # bookmarks land on the same pages. Before admin.site.urls, which would answer 404.
    re_path(
        r"^admin/builder/(?P<rest>(?:graph|graphversion)/.*)$",
        RedirectView.as_view(url="/admin/graphs/%(rest)s", permanent=True, query_string=True),
    ),
    re_path(r"^admin/builder/$", RedirectView.as_view(url="/admin/graphs/", permanent=True, query_string=True)),
    # The audit log's admin moved from the runs app to audit: old bookmarks and links
    # (/admin/runs/auditentry/..., query string kept) answer 301 to the same page there.
    re_path(r"^admin/runs/auditentry/(?P<rest>.*)$", views.admin_moved, {"to": "audit/auditentry/"}),
    path("admin/", admin.site.urls),
    # Browsers ask for /favicon.ico on pages without an icon link (the admin): the app's icon.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("api/v1/", include(api_v1)),
    path("api/schema/", views.SchemaView.as_view(), name="schema"),
    # The UIs are pages for a logged-in browser: anonymous visitors go to the login page.
    path("api/docs/", login_required(SpectacularSwaggerView.as_view(url_name="schema")), name="api-docs"),
    path("api/redoc/", login_required(SpectacularRedocView.as_view(url_name="schema")), name="api-redoc"),
    re_path(r"^api/", api_not_found),  # unmatched API URLs answer JSON too
    # Last: any other URL is the app's own 404 page, whatever DEBUG says (Django's debug
    # 404 lists every URL pattern, also to a visitor who is not signed in).
    re_path(r"^", views.page_not_found),
]

# Http404 raised outside the API while DEBUG is off: the same page.
handler404 = "ballast.views.page_not_found"
