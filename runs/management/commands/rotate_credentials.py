"""``manage.py rotate_credentials``: re-encrypt every stored provider key with the first key of BALLAST_CREDENTIALS_KEY."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from runs.providers.credentials import CredentialUnreadable, credentials_rotate


class Command(BaseCommand):
    help = (
        "Re-encrypt the API keys of providers added in the app with the first key of BALLAST_CREDENTIALS_KEY. "
        "Rotation: put a new key first (BALLAST_CREDENTIALS_KEY=new,old), run this, then drop the old key."
    )

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            count = credentials_rotate()
        except CredentialUnreadable as exc:
            raise CommandError(f"{exc.message} (nothing was changed)") from None
        self.stdout.write(f"re-encrypted {count} stored key(s) with the first key of BALLAST_CREDENTIALS_KEY")
