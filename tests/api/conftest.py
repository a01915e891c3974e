"""Fixtures of the API tests: quick password hashing and the world of users, tokens and runs (tests/support/world.py)."""
from tests.support.world import fast_passwords, world  # noqa: F401  (fixtures)
