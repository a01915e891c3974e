"""Audit tests reuse the API tests' users, tokens and run factories."""
from tests.api.conftest import fast_passwords, world  # noqa: F401  (fixtures)
