"""Administration in the app: API tokens (own, staff anyone's; the key shown once), users and
groups (staff; create or invite, deactivate, members), the principal search; every write audited."""
from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from rest_framework.test import APIClient

from accounts.models import ApiToken
from audit.models import AuditEntry
from tests.support.world import World

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fast_passwords")]


def test_a_user_creates_lists_and_revokes_own_tokens_and_the_key_is_shown_once(world: World) -> None:
    viewer = world.clients["viewer"]
    created = viewer.post("/api/v1/tokens/", {"name": "CI pipeline"}, format="json")
    assert created.status_code == 201
    body = created.json()
    key = body["key"]
    assert key.startswith("bal_") and body["prefix"] == key[:12] and body["user"] == "viewer" and body["name"] == "CI pipeline"
    entry = AuditEntry.objects.get(action="token.create", data__prefix=body["prefix"])
    assert (entry.actor, entry.actor_type, entry.scope) == ("viewer", "token", f"user:{world.users['viewer'].pk}")

    fresh = APIClient()
    fresh.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert fresh.get("/api/v1/graphs/").status_code == 200
    listed = viewer.get("/api/v1/tokens/")
    assert listed.status_code == 200
    # Show once: the key is in no later answer, in no field.
    assert key not in listed.content.decode()
    mine = {t["prefix"]: t for t in listed.json()["results"]}
    assert set(mine) == set(ApiToken.objects.filter(user=world.users["viewer"]).values_list("prefix", flat=True))
    assert mine[body["prefix"]]["last_used_at"] is not None and "key" not in mine[body["prefix"]]

    revoked = viewer.post(f"/api/v1/tokens/{body['id']}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"] is not None and revoked.json()["revoked_by"] == "viewer"
    assert fresh.get("/api/v1/graphs/").status_code == 401
    assert AuditEntry.objects.filter(action="token.revoke", data__prefix=body["prefix"]).count() == 1
    again = viewer.post(f"/api/v1/tokens/{body['id']}/revoke/")
    assert again.status_code == 200 and AuditEntry.objects.filter(action="token.revoke", data__prefix=body["prefix"]).count() == 1


def test_tokens_of_others_are_hidden_from_users_and_open_to_staff(world: World) -> None:
    theirs = world.clients["builder"].post("/api/v1/tokens/", {"name": "mine"}, format="json").json()
    viewer = world.clients["viewer"]
    assert viewer.post(f"/api/v1/tokens/{theirs['id']}/revoke/").status_code == 404
    assert theirs["prefix"] not in {t["prefix"] for t in viewer.get("/api/v1/tokens/").json()["results"]}
    assert viewer.get("/api/v1/tokens/?all=true").status_code == 403
    refused = viewer.post("/api/v1/tokens/", {"name": "for builder", "user": "builder"}, format="json")
    assert refused.status_code == 403

    admin = world.clients["admin"]
    everyone = admin.get("/api/v1/tokens/?all=true&page_size=500").json()["results"]
    assert theirs["prefix"] in {t["prefix"] for t in everyone}
    revoked = admin.post(f"/api/v1/tokens/{theirs['id']}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["revoked_by"] == "admin"
    made = admin.post("/api/v1/tokens/", {"name": "for viewer", "user": "viewer"}, format="json")
    assert made.status_code == 201 and made.json()["user"] == "viewer" and made.json()["created_by"] == "admin"
    unknown = admin.post("/api/v1/tokens/", {"name": "x", "user": "nobody"}, format="json")
    assert unknown.status_code == 400 and "user" in unknown.json()["error"]["fields"]
    blank = viewer.post("/api/v1/tokens/", {"name": ""}, format="json")
    assert blank.status_code == 400 and "name" in blank.json()["error"]["fields"]


def test_staff_create_a_user_with_a_password_and_groups(world: World, settings) -> None:
    settings.AUTH_PASSWORD_VALIDATORS = [{"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"}]
    admin = world.clients["admin"]
    created = admin.post("/api/v1/users/", {"username": "ada", "email": "ada@example.org", "password": "correct horse battery", "groups": ["approvers"]}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["groups"] == ["approvers"] and body["is_active"] and not body["is_staff"] and body["invite_url"] is None and body["has_password"]
    assert "password" not in body
    browser = Client()
    assert browser.login(username="ada", password="correct horse battery")
    entry = AuditEntry.objects.get(action="user.create", object_id=str(body["id"]))
    assert entry.actor == "admin" and entry.data["groups"] == ["approvers"] and "password" not in str(entry.data)

    taken = admin.post("/api/v1/users/", {"username": "ADA", "password": "correct horse battery"}, format="json")
    assert taken.status_code == 409 and "username" in taken.json()["error"]["fields"]
    weak = admin.post("/api/v1/users/", {"username": "bob", "password": "123"}, format="json")
    assert weak.status_code == 400 and "password" in weak.json()["error"]["fields"]
    neither = admin.post("/api/v1/users/", {"username": "bob"}, format="json")
    assert neither.status_code == 400 and "password" in neither.json()["error"]["fields"]
    bad_group = admin.post("/api/v1/users/", {"username": "bob", "invite": True, "groups": ["nope"]}, format="json")
    assert bad_group.status_code == 400 and "groups" in bad_group.json()["error"]["fields"]
    bad_name = admin.post("/api/v1/users/", {"username": "bob smith", "invite": True}, format="json")
    assert bad_name.status_code == 400 and "username" in bad_name.json()["error"]["fields"]
    assert not get_user_model().objects.filter(username="bob").exists()


def test_an_invited_user_chooses_a_password_through_the_link(world: World) -> None:
    admin = world.clients["admin"]
    created = admin.post("/api/v1/users/", {"username": "grace", "invite": True, "groups": ["builders"]}, format="json")
    assert created.status_code == 201
    body = created.json()
    assert body["has_password"] is False
    path = re.sub(r"^https?://[^/]+", "", body["invite_url"])
    assert path.startswith("/accounts/reset/")
    browser = Client()
    form = browser.get(path, follow=True)
    assert form.status_code == 200 and b"new_password1" in form.content
    done = browser.post(form.redirect_chain[-1][0], {"new_password1": "a long new secret 42", "new_password2": "a long new secret 42"})
    assert done.status_code == 302
    assert Client().login(username="grace", password="a long new secret 42")
    # The link works once: the password it was made for is gone.
    assert b"new_password1" not in Client().get(path, follow=True).content
    again = admin.post(f"/api/v1/users/{body['id']}/invite/")
    assert again.status_code == 200 and "/accounts/reset/" in again.json()["invite_url"]
    assert AuditEntry.objects.filter(action="user.invite", object_id=str(body["id"])).count() == 1


def test_staff_deactivate_and_reactivate_and_set_groups(world: World) -> None:
    admin = world.clients["admin"]
    viewer = world.users["viewer"]
    viewer_api = world.clients["viewer"]
    off = admin.patch(f"/api/v1/users/{viewer.pk}/", {"is_active": False}, format="json")
    assert off.status_code == 200 and off.json()["is_active"] is False
    assert viewer_api.get("/api/v1/graphs/").status_code == 401  # its tokens stop working
    on = admin.patch(f"/api/v1/users/{viewer.pk}/", {"is_active": True, "groups": ["operators", "approvers"]}, format="json")
    assert on.status_code == 200 and on.json()["groups"] == ["approvers", "operators"]
    assert viewer_api.get("/api/v1/graphs/").status_code == 200
    entries = list(AuditEntry.objects.filter(action="user.update", object_id=str(viewer.pk)).order_by("seq").values_list("data", flat=True))
    assert entries[0]["is_active"] is False and entries[1]["groups"] == ["approvers", "operators"]
    same = admin.patch(f"/api/v1/users/{viewer.pk}/", {"groups": ["operators", "approvers"]}, format="json")
    assert same.status_code == 200 and AuditEntry.objects.filter(action="user.update", object_id=str(viewer.pk)).count() == 2
    self_off = admin.patch(f"/api/v1/users/{world.users['admin'].pk}/", {"is_active": False}, format="json")
    assert self_off.status_code == 400 and "is_active" in self_off.json()["error"]["fields"]
    assert admin.patch("/api/v1/users/999999/", {"is_active": False}, format="json").status_code == 404
    listed = admin.get("/api/v1/users/?q=view").json()
    assert [u["username"] for u in listed["results"]] == ["viewer"]


def test_staff_create_groups_and_set_members(world: World) -> None:
    admin = world.clients["admin"]
    created = admin.post("/api/v1/groups/", {"name": "finance", "members": ["viewer", "starter"]}, format="json")
    assert created.status_code == 201 and created.json()["members"] == ["starter", "viewer"] and created.json()["is_role"] is False
    group_id = created.json()["id"]
    assert admin.post("/api/v1/groups/", {"name": "Finance"}, format="json").status_code == 409
    changed = admin.patch(f"/api/v1/groups/{group_id}/", {"members": ["viewer", "builder"]}, format="json")
    assert changed.status_code == 200 and changed.json()["members"] == ["builder", "viewer"]
    entry = AuditEntry.objects.get(action="group.members", object_id=str(group_id))
    assert entry.data["added"] == ["builder"] and entry.data["removed"] == ["starter"] and entry.scope == f"group:{group_id}"
    unknown = admin.patch(f"/api/v1/groups/{group_id}/", {"members": ["ghost"]}, format="json")
    assert unknown.status_code == 400 and "members" in unknown.json()["error"]["fields"]
    groups = {g["name"]: g for g in admin.get("/api/v1/groups/").json()}
    assert groups["approvers"]["is_role"] and groups["finance"]["members"] == ["builder", "viewer"]
    assert Group.objects.get(pk=group_id).user_set.count() == 2


def test_the_principal_search_offers_users_and_groups_to_builders(world: World) -> None:
    Group.objects.create(name="approvers-emea")
    found = world.clients["builder"].get("/api/v1/principals/?q=approv").json()["results"]
    assert {(p["kind"], p["name"]) for p in found} == {("user", "approver"), ("user", "graph_approver"), ("group", "approvers"), ("group", "approvers-emea")}
    only_groups = world.clients["admin"].get("/api/v1/principals/?q=approv&kind=group").json()["results"]
    assert {p["kind"] for p in only_groups} == {"group"}
    assert world.clients["builder"].get("/api/v1/principals/?kind=robot").status_code == 400
    get_user_model().objects.filter(username="approver").update(is_active=False)
    assert "approver" not in {p["name"] for p in world.clients["builder"].get("/api/v1/principals/?q=approver").json()["results"]}


def test_the_users_and_providers_pages_are_for_staff_and_the_tokens_page_for_everyone(world: World) -> None:
    browser = Client()
    for path in ("/users/", "/tokens/", "/providers/"):
        assert browser.get(path).status_code == 302
    browser.force_login(world.users["viewer"])
    assert browser.get("/users/").status_code == 403
    assert browser.get("/providers/").status_code == 403
    assert browser.get("/tokens/").status_code == 200
    browser.force_login(world.users["admin"])
    assert browser.get("/users/").status_code == 200
    assert browser.get("/providers/").status_code == 200


def test_a_staff_user_who_is_no_superuser_cannot_take_over_a_staff_or_superuser_account(world: World) -> None:
    from tests.support.world import client_with_token

    User = get_user_model()
    clerk = User.objects.create_user("clerk", password="pw-clerk", is_staff=True)
    other_staff = User.objects.create_user("other-staff", password="pw-other", is_staff=True)
    api = client_with_token(clerk)
    superuser = world.users["admin"]
    for target in (superuser, other_staff):
        assert api.patch(f"/api/v1/users/{target.pk}/", {"is_active": False}, format="json").status_code == 403
        assert api.post(f"/api/v1/users/{target.pk}/invite/").status_code == 403
        assert api.post("/api/v1/tokens/", {"name": "x", "user": target.get_username()}, format="json").status_code == 403
    superuser.refresh_from_db()
    assert superuser.is_active and not ApiToken.objects.filter(user__in=[superuser, other_staff], name="x").exists()
    assert not AuditEntry.objects.filter(action__in=["user.update", "user.invite", "token.create"], actor="clerk").exists()
    # Other users are the clerk's to manage; a superuser manages staff.
    assert api.patch(f"/api/v1/users/{world.users['viewer'].pk}/", {"groups": ["builders"]}, format="json").status_code == 200
    assert api.post("/api/v1/tokens/", {"name": "for viewer", "user": "viewer"}, format="json").status_code == 201
    assert world.clients["admin"].patch(f"/api/v1/users/{other_staff.pk}/", {"is_active": False}, format="json").status_code == 200
