"""ApiToken moved from runs to accounts: a database with tokens made under the old layout
migrates without losing a token, its key or the permissions granted on it, and back."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from accounts.authentication import token_for_key
from accounts.tokens import KEY_PREFIX, hash_key

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("runs", "0006_provider_credential"), ("accounts", None)]


def _state(executor, targets):
    """The models as of ``targets`` (an app at None: not there), with auth and contenttypes
    at their latest (their early states do not match the tables any more)."""
    contrib = [n for n in executor.loader.graph.leaf_nodes() if n[0] in ("auth", "contenttypes")]
    return executor.loader.project_state([t for t in targets if t[1] is not None] + contrib).apps


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return _state(MigrationExecutor(connection), targets)


def _latest():
    executor = MigrationExecutor(connection)
    return executor.loader.graph.leaf_nodes()


def test_tokens_survive_the_move_to_accounts():
    old = _migrate(BEFORE)
    try:
        User = old.get_model("auth", "User")
        OldToken = old.get_model("runs", "ApiToken")
        ContentType = old.get_model("contenttypes", "ContentType")
        Permission = old.get_model("auth", "Permission")
        Group = old.get_model("auth", "Group")
        user = User.objects.create(username="mover", is_active=True)
        key = KEY_PREFIX + "moved-token-key-0123456789"
        OldToken.objects.create(user=user, name="ci", prefix=key[:12], key_hash=hash_key(key))
        # The content type and a permission granted on it, as an existing install has them.
        ContentType.objects.filter(app_label="accounts", model="apitoken").delete()
        old_type, _ = ContentType.objects.get_or_create(app_label="runs", model="apitoken")
        permission, _ = Permission.objects.get_or_create(
            content_type=old_type, codename="view_apitoken", defaults={"name": "Can view API token"}
        )
        group = Group.objects.create(name="token-viewers")
        group.permissions.add(permission)
    finally:
        new = _migrate(_latest())

    NewToken = new.get_model("accounts", "ApiToken")
    assert NewToken._meta.db_table == "runs_apitoken"
    assert list(NewToken.objects.values_list("name", "prefix")) == [("ci", key[:12])]
    token = token_for_key(key)
    assert token is not None and token.user.username == "mover"
    granted = new.get_model("auth", "Group").objects.get(name="token-viewers").permissions.get()
    assert (granted.content_type.app_label, granted.codename) == ("accounts", "view_apitoken")


def test_the_move_reverses():
    _migrate(BEFORE)
    try:
        old = _state(MigrationExecutor(connection), BEFORE)
        assert old.get_model("runs", "ApiToken")._meta.db_table == "runs_apitoken"
        with pytest.raises(LookupError):
            old.get_model("accounts", "ApiToken")
    finally:
        new = _migrate(_latest())
    assert new.get_model("accounts", "ApiToken")._meta.db_table == "runs_apitoken"
