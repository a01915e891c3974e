"""The graph admin pages live under /admin/graphs/ since the move from builder; the old
/admin/builder/ addresses answer a permanent redirect to the same page."""
from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from graphs.models import Graph, GraphVersion
from tests.support.specs import chain, graph, node, publish

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser() -> Client:
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def version() -> GraphVersion:
    return publish(graph([node("start", "start"), node("end", "end")], chain("start", "end")))


def test_the_graph_pages_are_under_graphs(browser: Client, version: GraphVersion) -> None:
    graph_id = version.graph_id
    for url in ("/admin/graphs/", "/admin/graphs/graph/", f"/admin/graphs/graph/{graph_id}/change/",
                "/admin/graphs/graphversion/", f"/admin/graphs/graphversion/{version.pk}/change/"):
        assert browser.get(url).status_code == 200, url
    page = browser.get(f"/admin/graphs/graph/{graph_id}/change/").content.decode()
    assert Graph.objects.get(pk=graph_id).name in page and f"/admin/graphs/graphversion/{version.pk}/change/" in page


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("/admin/builder/", "/admin/graphs/"),
        ("/admin/builder/graph/", "/admin/graphs/graph/"),
        ("/admin/builder/graph/?q=refund&o=1", "/admin/graphs/graph/?q=refund&o=1"),
        ("/admin/builder/graph/{graph}/change/", "/admin/graphs/graph/{graph}/change/"),
        ("/admin/builder/graph/{graph}/history/", "/admin/graphs/graph/{graph}/history/"),
        ("/admin/builder/graph/add/", "/admin/graphs/graph/add/"),
        ("/admin/builder/graphversion/{version}/change/", "/admin/graphs/graphversion/{version}/change/"),
    ],
)
def test_the_old_builder_addresses_redirect_permanently(browser: Client, version: GraphVersion, old: str, new: str) -> None:
    ids = {"graph": version.graph_id, "version": version.pk}
    response = browser.get(old.format(**ids))
    assert response.status_code == 301
    assert response["Location"] == new.format(**ids)
    assert browser.get(response["Location"]).status_code == 200


def test_other_builder_admin_addresses_are_not_redirected(browser: Client) -> None:
    # Only the moved models' pages: a name builder never had stays a 404 of the admin.
    assert browser.get("/admin/builder/draft/").status_code == 404
