"""``manage.py create_login``: ensure an admin login exists and print it (for make up)."""
from __future__ import annotations

import os
import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandParser

from accounts.authentication import ROLES

PASSWORD_FILE = "admin-password.txt"


def login_hint(username: str | None = None) -> str:
    """The admin login as ``make up`` made it, for the line after "Ballast is up":
    ``Sign in as admin / <password>`` (read from var/admin-password.txt), or where to find
    it when the file is gone (a password set by hand is not printed)."""
    username = username or os.environ.get("BALLAST_ADMIN_USER", "admin")
    secret_file = settings.VAR_DIR / PASSWORD_FILE
    try:
        password = secret_file.read_text().strip()
    except OSError:
        password = ""
    if password:
        return f"Sign in as {username} / {password}  (kept in {secret_file})"
    return f"Sign in as {username} with the password create_login printed (no {secret_file}: python manage.py changepassword {username} sets a new one)"


class Command(BaseCommand):
    help = "Create the role groups and an 'admin' superuser if missing; print the login."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default=os.environ.get("BALLAST_ADMIN_USER", "admin"))

    def handle(self, *args: Any, **opts: Any) -> None:
        for name in ROLES:
            Group.objects.get_or_create(name=name)
        secret_file = settings.VAR_DIR / PASSWORD_FILE
        User = get_user_model()
        user = User.objects.filter(username=opts["username"]).first()
        if user is None:
            password = os.environ.get("BALLAST_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
            user = User.objects.create_superuser(opts["username"], f"{opts['username']}@localhost", password)
            user.groups.set(Group.objects.filter(name__in=ROLES))
            secret_file.write_text(password + "\n")
            secret_file.chmod(0o600)
        password = secret_file.read_text().strip() if secret_file.exists() else "(set earlier; see var/admin-password.txt)"
        self.stdout.write(f"login: {user.username} / {password}")
