"""``manage.py revoke_token <prefix|id> | --user USERNAME``: revoke API tokens (audited)."""
from __future__ import annotations

import getpass
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import ApiToken
from accounts.tokens import token_revoke


class Command(BaseCommand):
    help = "Revoke an API token by its prefix (bal_xxxxxxxx), its id, or every active token of --user."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("token", nargs="?", help="Token prefix (first 12 characters of the key, or the whole key) or id.")
        parser.add_argument("--user", help="Revoke every active token of this username.")

    def handle(self, *args: Any, **opts: Any) -> None:
        active = ApiToken.objects.select_related("user").filter(revoked_at__isnull=True)
        if opts["user"]:
            tokens = list(active.filter(user__username=opts["user"]))
        elif opts["token"]:
            ref = opts["token"]
            tokens = list(active.filter(pk=int(ref))) if ref.isdigit() else list(active.filter(prefix=ref[:12]))
            if len(tokens) > 1:
                raise CommandError(f"{len(tokens)} active tokens share the prefix {ref[:12]!r}; revoke by id")
        else:
            raise CommandError("name a token (prefix or id) or --user")
        if not tokens:
            raise CommandError("no matching active token")
        by = f"manage.py revoke_token ({getpass.getuser()})"
        for token in tokens:
            token_revoke(token=token, by=by, actor_type="operator")
            self.stdout.write(f"revoked {token.prefix}… of {token.user.username} (id {token.pk})")
