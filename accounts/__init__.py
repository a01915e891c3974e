"""Accounts: who is calling Ballast (API tokens, token and WebSocket authentication, roles)."""
