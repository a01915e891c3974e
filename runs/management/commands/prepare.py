"""``manage.py prepare``: migrate, load the examples and ensure a login in one process (make up)."""
from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Apply migrations, load the example graphs and create the admin login (what make up runs before serve)."

    def handle(self, *args: Any, **opts: Any) -> None:
        # One interpreter for the three steps: each manage.py start costs seconds of imports
        # on a loaded machine, most of make up's time after the packages are in.
        verbosity = opts.get("verbosity", 1)
        call_command("migrate", interactive=False, verbosity=verbosity, stdout=self.stdout, stderr=self.stderr)
        call_command("load_examples", verbosity=verbosity, stdout=self.stdout, stderr=self.stderr)
        call_command("create_login", verbosity=verbosity, stdout=self.stdout, stderr=self.stderr)
