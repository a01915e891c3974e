"""The base class of service errors: each carries the HTTP status, code, message and fields of its API answer."""
from __future__ import annotations

from typing import Any, ClassVar


class ServiceError(Exception):
    """An error a service raises for its caller, carrying its own API answer, so the API
    layer (``core.api``) maps this one class and knows no app.

    The answer is ``status_code`` with the body ``{"code", "message", "fields", **extra}``:

    - ``code``: a short machine name (``graph_invalid``, ``already_decided``); a class
      attribute, or set per instance where one class has several codes.
    - ``message``: the text shown to the client; ``str(error)`` stays the text for logs
      and the command line (they differ where the client gets a summary, or must not learn
      what the log may say, e.g. which hidden run was asked for).
    - ``fields``: field path (``input.items[0].sku``, ``nodes[2].config.x``; see
      ``core.fields.field_path``) -> messages; empty when no field is at fault.
    - ``extra``: further keys of the body, in order (``issues``, ``decided_by``...).
    """

    status_code: ClassVar[int] = 400
    code: str = "error"

    def __init__(self, text: str = "", *, message: str | None = None, fields: dict[str, list[str]] | None = None, **extra: Any):
        super().__init__(text)
        self.message = text if message is None else message
        self.fields = fields or {}
        self.extra = extra

    def body(self) -> dict[str, Any]:
        """The ``error`` object of the API answer."""
        return {"code": self.code, "message": self.message, "fields": self.fields, **self.extra}


class NotFoundError(ServiceError):
    """Nothing to answer with: a 404 with DRF's own ``not_found`` body (what the client
    may not read is answered as if it did not exist)."""

    status_code = 404
    code = "not_found"

    def __init__(self, what: object = ""):
        # ``what`` (a run id, "run 5") is for logs only: the client learns nothing of it.
        super().__init__(str(what), message="Not found.")


class ForbiddenError(ServiceError):
    """The user may not do this: a 403 ``not_allowed`` with the error's text."""

    status_code = 403
    code = "not_allowed"


class ConflictError(ServiceError):
    """The object is not in a state that allows this (409)."""

    status_code = 409
