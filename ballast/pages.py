"""Renders a browser-app page: one template, the page's context as one JSON script tag, the Vite bundle."""
from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import render
from django.template.response import TemplateResponse
from django.urls import reverse

from accounts.policy import may_operate_some_graph


def user_context(user: Any) -> dict[str, Any] | None:
    """What the front end knows of the signed-in user: name, groups and what they may do.

    ``can`` follows the API's roles (groups builders, operators, approvers; staff may do
    everything); the server checks every action again, this only decides which controls
    are shown. Returns None for an anonymous user.
    """
    if not getattr(user, "is_authenticated", False):
        return None
    groups = sorted(user.groups.values_list("name", flat=True))
    staff = bool(user.is_staff or user.is_superuser)
    operate = staff or may_operate_some_graph(user)
    return {
        "id": user.pk,
        "username": user.get_username(),
        "display_name": user.get_full_name() or user.get_username(),
        "is_staff": staff,
        "groups": groups,
        "can": {
            "build": staff or "builders" in groups,
            # A user some graph names as its operator sees the start controls too; the API
            # refuses graphs that are not theirs to operate.
            "operate": operate,
            "approve": staff or "approvers" in groups,
            "admin": staff,
            # The audit log is the admins'; the workers page the admins' and operators'.
            "audit": staff,
            "workers": operate,
        },
    }


def page_context(request: HttpRequest, page: str, *, title: str, props: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON context of one page (frontend/src/lib/context.ts ``PageContext``).

    ``page`` names a component of frontend/src/pages/index.ts, or is ``""`` for a
    server-rendered page (sign-in, password change) that only mounts the top bar.
    """
    return {
        "page": page,
        "title": title,
        "user": user_context(request.user),
        "csrf_token": get_token(request),
        "urls": {
            "home": reverse("home"),
            "graphs": reverse("graphs-page"),
            "runs": reverse("runs-page"),
            "approvals": reverse("approvals-page"),
            "costs": reverse("costs-page"),
            "audit": reverse("audit-page"),
            "workers": reverse("workers-page"),
            "tokens": reverse("tokens-page"),
            "users": reverse("users-page"),
            "providers": reverse("providers-page"),
            "mcp_servers": reverse("mcp-servers-page"),
            "login": reverse("login"),
            "logout": reverse("logout"),
            "password_change": reverse("password_change"),
            "admin": reverse("admin:index"),
            "api": "/api/v1/",
        },
        "props": props or {},
    }


def render_page(request: HttpRequest, page: str, *, title: str, props: dict[str, Any] | None = None,
                status: int = 200) -> HttpResponse:
    """Render ``templates/app.html`` for page component ``page`` (a key of frontend/src/pages/index.ts).

    ``props`` must be JSON-serialisable; they reach the page component as its props.
    """
    context = page_context(request, page, title=title, props=props)
    return render(request, "app.html", {"page_context": context, "title": title}, status=status)


def lockout_response(request: HttpRequest, original_response: HttpResponse | None = None, credentials: dict | None = None) -> HttpResponse:
    """django-axes's lockout answer (``AXES_LOCKOUT_CALLABLE``): the sign-in page's
    look with why and for how long, status 429 and ``Retry-After`` (the cool-off in
    seconds)."""
    minutes = float(settings.AXES_COOLOFF_TIME) * 60
    seconds = max(1, math.ceil(minutes * 60))
    title = "Sign-in locked"
    context = {
        "page_context": page_context(request, "", title=title),
        "title": title,
        "failure_limit": settings.AXES_FAILURE_LIMIT,
        "minutes": max(1, math.ceil(minutes)),
    }
    response = TemplateResponse(request, "registration/locked_out.html", context, status=429)
    response["Retry-After"] = str(seconds)
    return response.render()
