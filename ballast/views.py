"""The browser app's pages: thin views that check access and hand a page name and props to render_page.

Every page needs a signed-in user (anonymous visitors are sent to the login page); what
a user may *do* on a page follows the API's roles (``user.can`` in the page context), and
the API refuses anything else. The sign-in and password pages are Django's auth views
with the page context added, so their server-rendered forms get the app's top bar and CSS.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.urls import Resolver404, resolve, reverse
from django.utils import translation
from drf_spectacular.views import SpectacularAPIView
from rest_framework.response import Response

from accounts import policy
from accounts.authentication import is_admin
from approvals.models import ApprovalRequest
from ballast.pages import page_context, render_page
from core.api import api_not_found
from graphs.models import Graph
from runs.models import Run


def _not_found(request: HttpRequest, what: str, back: str, back_label: str) -> HttpResponse:
    """The app's own 404 page for ``what`` (e.g. "run #12"), with a link to ``back``: the same
    answer for an object that does not exist and one the user may not read, and never
    Django's technical 404 page (which lists the URL patterns while DEBUG is on)."""
    return render_page(request, "notfound", title="Not found", props={"what": what, "back": back, "backLabel": back_label}, status=404)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """Any URL no route matches (the last route, so DEBUG's technical 404 with its list of
    URL patterns never shows) and ``handler404``: the app's own 404 page, signed in or not;
    under ``/api/`` the API's JSON 404. A page URL missing its final slash whose slashed
    form is a page is redirected there, as CommonMiddleware's APPEND_SLASH would (a
    catch-all route makes every path resolve, so the middleware no longer does)."""
    if request.path_info.startswith("/api/"):
        return api_not_found(request)
    if settings.APPEND_SLASH and not request.path_info.endswith("/"):
        try:
            match = resolve(request.path_info + "/")
        except Resolver404:
            match = None
        if match is not None and match.func is not page_not_found:
            return HttpResponsePermanentRedirect(request.get_full_path(force_append_slash=True))
    return render_page(request, "notfound", title="Not found", props={"address": request.path}, status=404)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """``/``: the signed-in user's start page (graphs and the latest runs)."""
    return render_page(request, "home", title="Home")


@login_required
def graph_list(request: HttpRequest) -> HttpResponse:
    """``/graphs/``: search, create, duplicate, delete, import and export graphs."""
    return render_page(request, "graphs", title="Graphs")


@login_required
def graph_builder(request: HttpRequest, graph_id: int) -> HttpResponse:
    """``/graphs/<id>/``: the canvas for one graph (read-only for users who may not build)."""
    graph = Graph.objects.filter(pk=graph_id).first()
    if graph is None:
        return _not_found(request, f"graph #{graph_id}", "/graphs/", "All graphs")
    return render_page(request, "builder", title=graph.name, props={"graphId": graph.pk})


@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    """``/runs/``: the runs the user may read, newest first (the page lists them through the API)."""
    return render_page(request, "runs", title="Runs")


@login_required
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    """``/runs/<id>/``: one run's status, version, input, output or error, and steps (404
    if unknown or not the user's to read: ``accounts.policy``, audited)."""
    run = Run.objects.select_related("graph_version__graph").filter(pk=run_id).first()
    if run is None:
        return _not_found(request, f"run #{run_id}", "/runs/", "All runs")
    try:
        policy.require_read(request.user, run, action="run.page")
    except policy.RunHidden:
        return _not_found(request, f"run #{run_id}", "/runs/", "All runs")
    return render_page(request, "run", title=f"Run {run.pk}", props={"runId": run.pk})


@login_required
def run_compare(request: HttpRequest) -> HttpResponse:
    """``/runs/compare/?a=<id>&b=<id>``: two runs of one graph side by side (the page reads
    them through the API, which checks the user may read both)."""
    return render_page(request, "compare", title="Compare runs")


@login_required
def approval_inbox(request: HttpRequest, approval_id: int | None = None) -> HttpResponse:
    """``/approvals/`` and ``/approvals/<id>/`` (the link in approval emails): the inbox,
    opened on one request. Reading it never decides: GET and HEAD only render the page;
    a decision is the page's signed-in POST to the API with CSRF. 404 for a request the
    user may not read (audited)."""
    props: dict[str, Any] = {}
    if approval_id is not None:
        approval = ApprovalRequest.objects.select_related("run").filter(pk=approval_id).first()
        if approval is None:
            return _not_found(request, f"approval #{approval_id}", "/approvals/", "The inbox")
        try:
            policy.require_read(request.user, approval.run, action="approval.page", obj=approval)
        except policy.RunHidden:
            return _not_found(request, f"approval #{approval_id}", "/approvals/", "The inbox")
        props["approvalId"] = approval.pk
    return render_page(request, "approvals", title="Approvals", props=props)


@login_required
def costs(request: HttpRequest) -> HttpResponse:
    """``/costs/``: spend by day, graph, node and model, the costliest runs and steps,
    retries and crash re-runs apart, budgets, CSV export (runs the user may read)."""
    return render_page(request, "costs", title="Costs")


@login_required
def audit_log(request: HttpRequest) -> HttpResponse:
    """``/audit/``: the audit log with filters, the chain's verification and export (admins;
    others get 403, as from the API)."""
    if not is_admin(request.user):
        return render_page(request, "forbidden", title="Audit log", props={"what": "the audit log", "who": "administrators"}, status=403)
    return render_page(request, "audit", title="Audit log")


@login_required
def workers(request: HttpRequest) -> HttpResponse:
    """``/workers/``: worker clusters, their heartbeats and in-flight steps, the queue depth
    (admins and operators)."""
    user = request.user
    if not (is_admin(user) or policy.may_operate_some_graph(user)):
        return render_page(request, "forbidden", title="Workers", props={"what": "the workers", "who": "administrators and operators", "group": "operators"}, status=403)
    return render_page(request, "workers", title="Workers")


@login_required
def tokens(request: HttpRequest) -> HttpResponse:
    """``/tokens/``: the signed-in user's API tokens (create, the key shown once, revoke);
    staff also see and revoke everyone's."""
    return render_page(request, "tokens", title="API tokens")


@login_required
def users(request: HttpRequest) -> HttpResponse:
    """``/users/``: users, groups and roles (create or invite, deactivate, groups and
    members); staff only, others get 403 as from the API."""
    if not is_admin(request.user):
        return render_page(request, "forbidden", title="Users", props={"what": "users and groups", "who": "administrators"}, status=403)
    return render_page(request, "users", title="Users")


@login_required
def providers(request: HttpRequest) -> HttpResponse:
    """``/providers/``: LLM providers and their keys (add, test the connection, rotate the
    key, remove); staff only, others get 403 as the API's writes answer."""
    if not is_admin(request.user):
        return render_page(request, "forbidden", title="LLM providers", props={"what": "the LLM providers", "who": "administrators"}, status=403)
    return render_page(request, "providers", title="LLM providers")


@login_required
def mcp_servers(request: HttpRequest) -> HttpResponse:
    """``/mcp-servers/``: MCP servers added in the app (add, change, test the connection and
    see the tools it lists, remove); staff only, others get 403 as from the API. The page
    gets the stdio commands this deployment allows (``BALLAST_MCP_STDIO_COMMANDS``) as
    ``stdioCommands``, so its form offers only those."""
    if not is_admin(request.user):
        return render_page(request, "forbidden", title="MCP servers", props={"what": "the MCP servers", "who": "administrators"}, status=403)
    return render_page(request, "mcpservers", title="MCP servers", props={"stdioCommands": list(settings.BALLAST_MCP_STDIO_COMMANDS)})


def _with_page_context(view: Any, title: str) -> Any:
    """Wrap a Django auth class-based view so its template gets ``page_context`` (top bar, CSRF, urls)."""

    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        extra = {"page_context": page_context(request, "", title=title), "title": title}
        return view.as_view(extra_context=extra)(request, *args, **kwargs)

    wrapped.__name__ = view.__name__
    wrapped.__doc__ = view.__doc__
    return wrapped


# Django's own views (and forms, rate of password hashing, redirects), our templates.
login = _with_page_context(auth_views.LoginView, "Sign in")
password_change = login_required(_with_page_context(auth_views.PasswordChangeView, "Change password"))
password_change_done = login_required(_with_page_context(auth_views.PasswordChangeDoneView, "Password changed"))
# Password reset by email (the console backend in development prints the mail), signed in or not.
password_reset = _with_page_context(auth_views.PasswordResetView, "Reset your password")
password_reset_done = _with_page_context(auth_views.PasswordResetDoneView, "Check your email")
password_reset_confirm = _with_page_context(auth_views.PasswordResetConfirmView, "Choose a new password")
password_reset_complete = _with_page_context(auth_views.PasswordResetCompleteView, "Password reset")


def admin_moved(request: HttpRequest, rest: str, to: str) -> HttpResponse:
    """301 from an admin page of a model that moved to another app (``/admin/<old app>/<model>/<rest>``)
    to the same page under its new app: ``to`` is the new ``<app>/<model>/`` under the admin's
    root, ``rest`` the rest of the old path (a changelist, ``<pk>/change/``, ``<pk>/history/``...),
    the query string (filters, search) kept. The admin itself checks who may see the page."""
    url = reverse("admin:index") + to + quote(rest)
    query = request.META.get("QUERY_STRING", "")
    return HttpResponsePermanentRedirect(f"{url}?{query}" if query else url)


class SchemaView(SpectacularAPIView):
    """``/api/schema/``: drf-spectacular's OpenAPI document, generated once per process and
    language (about a second of CPU each time otherwise: the routes and serializers it
    describes do not change while the process runs, and ``SERVE_PUBLIC`` makes it the same
    for every caller)."""

    _generated: dict[tuple[str | None, str], dict[str, Any]] = {}

    def _get_schema_response(self, request: Any) -> Response:
        version = self.api_version or request.version or self._get_version_parameter(request)
        key = (version, translation.get_language() or "")
        schema = self._generated.get(key)
        if schema is None:
            generator = self.generator_class(urlconf=self.urlconf, api_version=version, patterns=self.patterns)
            schema = self._generated[key] = generator.get_schema(request=request, public=self.serve_public)
        return Response(data=schema, headers={"Content-Disposition": f'inline; filename="{self._get_filename(request, version)}"'})
