"""API tokens in the admin: adding one shows its key once and audits it; the revoke action
revokes and audits; tokens cannot be deleted or edited."""
from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from accounts.models import ApiToken
from audit.models import AuditEntry
from tests.support.world import World, client_with_token

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]


def test_admin_creates_and_revokes_tokens_with_audit(world: World) -> None:
    browser = Client()
    browser.force_login(world.users["admin"])
    viewer = world.users["viewer"]
    response = browser.post("/admin/accounts/apitoken/add/", {"user": viewer.pk, "name": "from admin"}, follow=True)
    assert response.status_code == 200
    shown = [str(m) for m in get_messages(response.wsgi_request)] or [m.message for m in response.context["messages"]]
    key = next(word for m in shown for word in m.split() if word.startswith("bal_"))
    token = ApiToken.objects.get(prefix=key[:12])
    assert token.user == viewer and token.name == "from admin" and token.key_hash != key
    api = client_with_token(None)
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert api.get("/api/v1/graphs/").status_code == 200
    created = AuditEntry.objects.get(action="token.create", data__prefix=key[:12])
    assert (created.actor, created.actor_type) == ("admin", "user")

    response = browser.post("/admin/accounts/apitoken/", {"action": "revoke_selected", "_selected_action": [token.pk]}, follow=True)
    assert response.status_code == 200
    token.refresh_from_db()
    assert token.revoked_at is not None and token.revoked_by_name == "admin"
    assert api.get("/api/v1/graphs/").status_code == 401
    assert AuditEntry.objects.filter(action="token.revoke", data__prefix=key[:12]).count() == 1
    assert browser.post(f"/admin/accounts/apitoken/{token.pk}/delete/", {"post": "yes"}).status_code == 403
