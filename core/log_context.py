"""Structured logs: the step in hand's run, step, attempt, worker and trace id, and the build, on every log record.

The engine binds the step's fields (:func:`bound`) around its execution and commit
(runs.engine.loop.run_claimed); :class:`StepFields`, a filter on the console handler
(ballast.settings LOGGING), copies them onto every record logged meanwhile, from any
module (the engine, a node kind, a provider SDK's logger that propagates to it), and
adds this process's build (core.build). Records logged outside a step carry the build
and ``null`` for the step's fields. With ``BALLAST_LOG_FORMAT=json`` the handler writes
each record as one JSON object per line (python-json-logger; the fields are named in LOGGING);
the plain format is unchanged.

The fields live in a :class:`contextvars.ContextVar`: they follow the step into a thread
started under :func:`contextvars.copy_context` (a node with a timeout runs on one) and
never leak between two steps of one worker.
"""
from __future__ import annotations

import contextvars
import logging
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from core.build import build

# The step fields every record carries (None when no step is in hand).
STEP_FIELDS = ("run_id", "step_id", "attempt", "worker", "trace_id")

_fields: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar("ballast_log_fields", default=MappingProxyType({}))


class bound:  # lower case: used as a function, ``with bound(...)``
    """Add ``fields`` (of :data:`STEP_FIELDS`) to every record logged in this context
    until the block ends; nested blocks add to (and override) the outer one's. A class,
    not a generator: it is entered once per step."""

    __slots__ = ("fields", "token")

    def __init__(self, **fields: Any) -> None:
        self.fields = fields
        self.token: contextvars.Token[Mapping[str, Any]] | None = None

    def __enter__(self) -> None:
        outer = _fields.get()
        self.token = _fields.set({**outer, **self.fields} if outer else self.fields)

    def __exit__(self, *exc: object) -> None:
        if self.token is not None:
            _fields.reset(self.token)


def bind_process(**fields: Any) -> None:
    """Add ``fields`` to every record this thread logs from now on, for the life of the
    process (a worker process's id, set once after its fork), under any :func:`bound`."""
    _fields.set({**_fields.get(), **fields})


def current() -> Mapping[str, Any]:
    """The fields bound in this context now ({} outside any :func:`bound` block)."""
    return _fields.get()


class StepFields(logging.Filter):
    """A handler filter that sets :data:`STEP_FIELDS` (from :func:`bound`, else None) and
    ``build`` on each record it sees; a field the call set itself (``extra=``) is kept.
    Never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = _fields.get()
        for name in STEP_FIELDS:
            if not hasattr(record, name):
                setattr(record, name, fields.get(name))
        if not hasattr(record, "build"):
            record.build = build()
        return True
