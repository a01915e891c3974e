"""``manage.py create_token <username> [--name NAME]``: create an API token and print its key once."""
from __future__ import annotations

import getpass
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.tokens import token_create


class Command(BaseCommand):
    help = "Create an API token for a user (audited) and print the key. The key is not stored: copy it now."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="What the token is for (shown in lists).")
        parser.add_argument("--quiet", action="store_true", help="Print only the key (for scripts).")

    def handle(self, *args: Any, **opts: Any) -> None:
        user = get_user_model().objects.filter(username=opts["username"]).first()
        if user is None:
            raise CommandError(f"no user named {opts['username']!r}")
        if not user.is_active:
            raise CommandError(f"user {user.username!r} is not active")
        by = f"manage.py create_token ({getpass.getuser()})"
        token, key = token_create(user=user, name=opts["name"], by=by, actor_type="operator")
        if opts["quiet"]:
            self.stdout.write(key)
        else:
            self.stdout.write(f"token {token.prefix}… for {user.username} (id {token.pk}):\n{key}\nUse it as: Authorization: Token {key}")
