"""Audit tests reuse the API tests' users, tokens and run factories (tests/support/world.py)."""
from tests.support.world import fast_passwords, world  # noqa: F401  (fixtures)
