"""Checking a create-or-update payload field by field: what the services of stored, named objects (LLM providers, MCP servers) share."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def text_problem(value: Any, *, limit: int) -> str | None:
    """Why ``value`` is not acceptable text of at most ``limit`` characters without control
    characters, or None when it is."""
    if not isinstance(value, str):
        return "must be a string"
    if len(value) > limit:
        return f"at most {limit} characters"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        return "must not contain control characters"
    return None


class Payload:
    """A create (``existing`` None) or update payload being cleaned: ``errors`` collects
    each field's problems (field -> messages, the API's 400 ``fields``), ``out`` the
    cleaned values. On update a field that is absent or None keeps its stored value."""

    def __init__(self, data: Mapping[str, Any], existing: Any | None) -> None:
        self.data = data
        self.existing = existing
        self.errors: dict[str, list[str]] = {}
        self.out: dict[str, Any] = {}

    def current(self, name: str, default: Any = "") -> Any:
        """The payload's ``name`` when given (not None), else the stored object's, else ``default``."""
        if name in self.data and self.data[name] is not None:
            return self.data[name]
        return getattr(self.existing, name, default) if self.existing is not None else default

    def name(self, pattern: re.Pattern[str], rule: str, *, what: str) -> None:
        """The ``name`` field: on create it must match ``pattern`` (``rule`` says how, in the
        error) and goes to ``out``; on update it cannot change (``what``: "provider", "server")."""
        if self.existing is None:
            name = self.data.get("name")
            if not isinstance(name, str) or not pattern.match(name):
                self.errors["name"] = [rule]
            else:
                self.out["name"] = name
        elif "name" in self.data and self.data["name"] is not None and self.data["name"] != self.existing.name:
            self.errors["name"] = [f"cannot be changed: delete this {what} and add it again under the new name"]
