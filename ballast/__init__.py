"""Ballast: a durable runtime for AI agents (Django project package)."""
