"""The browser app's pages: thin views that check access and hand a page name and props to render_page."""
from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404

from ballast.pages import render_page
from builder.models import Graph


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """``/``: the signed-in user's start page."""
    return render_page(request, "placeholder", title="Home")


@login_required
def graph_builder(request: HttpRequest, graph_id: int) -> HttpResponse:
    """``/graphs/<id>/``: the canvas for one graph (read-only for users who may not build)."""
    graph = get_object_or_404(Graph, pk=graph_id)
    return render_page(request, "builder", title=graph.name, props={"graphId": graph.pk})
