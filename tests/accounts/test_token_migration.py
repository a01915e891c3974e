"""ApiToken moved from runs to accounts: a database with tokens made under the old layout
migrates without losing a token, its key or the permissions granted on it, and back."""
from __future__ import annotations

import pytest

from accounts.authentication import token_for_key
from accounts.tokens import KEY_PREFIX, hash_key
from tests.support.migrations import latest, migrate, migrate_to, models_at

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("runs", "0006_provider_credential"), ("accounts", None)]


def test_tokens_survive_the_move_to_accounts():
    old = migrate_to(BEFORE)
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
        new = migrate_to(latest())

    NewToken = new.get_model("accounts", "ApiToken")
    assert NewToken._meta.db_table == "runs_apitoken"
    assert list(NewToken.objects.values_list("name", "prefix")) == [("ci", key[:12])]
    token = token_for_key(key)
    assert token is not None and token.user.username == "mover"
    granted = new.get_model("auth", "Group").objects.get(name="token-viewers").permissions.get()
    assert (granted.content_type.app_label, granted.codename) == ("accounts", "view_apitoken")


def test_the_move_reverses():
    migrate(BEFORE)
    try:
        old = models_at(BEFORE)
        assert old.get_model("runs", "ApiToken")._meta.db_table == "runs_apitoken"
        with pytest.raises(LookupError):
            old.get_model("accounts", "ApiToken")
    finally:
        new = migrate_to(latest())
    assert new.get_model("accounts", "ApiToken")._meta.db_table == "runs_apitoken"
