"""API plumbing shared by every app's views: error bodies, pagination, the base view, schema hooks.

Every error response has one shape::

    {"error": {"code": "invalid", "message": "Invalid input.", "fields": {"input.items[0].x": ["..."]}, ...}}

``fields`` maps a field path (keys joined by dots, list positions in brackets, as
``core.fields.field_path`` writes them; ``nodes[2].config.x`` for a graph's node) to
its messages (empty when no field is at fault); some codes add keys (``issues`` for graph
validation, ``decided_by`` for an approval decided before).
Service errors (``core.errors.ServiceError``: each carries its status, code, message, fields
and extra keys) are translated here, so views only call services.

This module is ground floor (core imports no app): who a request runs as for the audit log
is the app's business that owns tokens and principals, registered with
:func:`core.principals.register_request_principal` (accounts registers it).
"""
from __future__ import annotations

import logging
from base64 import b64encode
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.db.models import ProtectedError
from django.http import Http404
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiParameter, inline_serializer
from rest_framework import exceptions, serializers, status
from rest_framework.pagination import CursorPagination, PageNumberPagination
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from core import principals
from core.errors import ServiceError
from core.fields import field_path

log = logging.getLogger("ballast.api")

# Path ids are bigint columns: a larger number can name nothing (and PostgreSQL would
# refuse to compare with it), so it is a 404, not a database error.
MAX_ID = 2**63 - 1


class ApiError(exceptions.APIException):
    """An error with a code, a message, field errors and extra keys for the error body."""

    # Seconds for a Retry-After header (DRF's handler sends it when set), as Throttled has.
    wait: float | None = None

    def __init__(self, status_code: int, code: str, message: str, fields: dict[str, list[str]] | None = None, **extra: Any):
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.code = code
        self.message = message
        self.fields = fields or {}
        self.extra = extra


def conflict(code: str, message: str, fields: dict[str, list[str]] | None = None, **extra: Any) -> ApiError:
    """A 409 Conflict error."""
    return ApiError(status.HTTP_409_CONFLICT, code, message, fields, **extra)


def bad_request(code: str, message: str, fields: dict[str, list[str]] | None = None, **extra: Any) -> ApiError:
    """A 400 Bad Request error."""
    return ApiError(status.HTTP_400_BAD_REQUEST, code, message, fields, **extra)


def flatten_errors(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error detail as ``{"a.b[0].c": ["message", ...]}`` (the field path
    style of every Ballast error: ``core.fields.field_path``)."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, dict):
        for key, value in detail.items():
            for k, v in flatten_errors(value, field_path([key], prefix)).items():
                out.setdefault(k, []).extend(v)
    elif isinstance(detail, list):
        if all(not isinstance(d, (dict, list)) for d in detail):
            out.setdefault(prefix or "non_field_errors", []).extend(str(d) for d in detail)
        else:
            for i, value in enumerate(detail):
                for k, v in flatten_errors(value, field_path([i], prefix)).items():
                    out.setdefault(k, []).extend(v)
    else:
        out.setdefault(prefix or "non_field_errors", []).append(str(detail))
    return out


# What a 503 for a lost database connection asks the client to wait (s, the Retry-After header).
DATABASE_RETRY_AFTER_SECONDS = 1


def _translate(exc: Exception) -> Exception:
    """Map service exceptions to API errors (anything unknown stays as it is)."""
    if isinstance(exc, ServiceError):
        # Every app's service errors carry their own answer (core.errors), so this module
        # knows no app. An APIException, so DRF's handler marks the transaction for rollback.
        return ApiError(exc.status_code, exc.code, exc.message, exc.fields, **exc.extra)
    if isinstance(exc, ObjectDoesNotExist):
        return exceptions.NotFound()
    if isinstance(exc, ProtectedError):
        return conflict("protected", "Still in use: runs are pinned to this object's versions; it cannot be deleted.")
    if isinstance(exc, DjangoValidationError):
        return exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages})
    if isinstance(exc, Http404):
        return exceptions.NotFound()
    if isinstance(exc, PermissionDenied):
        return exceptions.PermissionDenied()
    if isinstance(exc, RequestDataTooBig):
        return ApiError(
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            "too_large",
            f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.",
        )
    if isinstance(exc, (OperationalError, InterfaceError)):
        # The database went away under the request (a restart, a failover, a pooler recycling
        # connections, pg_terminate_backend) or SQLite stayed locked. Django drops the broken
        # connection when the request ends, so the same request shortly after is answered: a
        # 503 the client may retry, not a 500 that says "bug". A write lost at its COMMIT may
        # have landed, so the answer does not claim nothing changed; starts and decisions
        # take idempotency keys for exactly this.
        log.warning("database unavailable during an API request: %s", exc)
        unavailable = ApiError(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "database_unavailable",
            "The database connection was lost during the request. Try again in a moment (with the same idempotency key, where the request takes one).",
            retry_after=DATABASE_RETRY_AFTER_SECONDS,
        )
        unavailable.wait = DATABASE_RETRY_AFTER_SECONDS  # DRF's handler sends it as Retry-After
        return unavailable
    if isinstance(exc, RecursionError):
        # A JSON body (or run input) nested thousands of levels deep.
        return bad_request("too_deep", "The request body is nested too deeply.")
    return exc


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """REST_FRAMEWORK['EXCEPTION_HANDLER']: every error as ``{"error": {...}}``; an
    unexpected exception is logged and answered with a 500 of the same shape."""
    exc = _translate(exc)
    response = drf_exception_handler(exc, context)
    if response is None:
        log.exception("unhandled API error", exc_info=exc)
        return Response(
            {"error": {"code": "server_error", "message": "Internal server error.", "fields": {}}},
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    if isinstance(exc, ApiError):
        body = {"code": exc.code, "message": exc.message, "fields": exc.fields, **exc.extra}
    elif isinstance(exc, exceptions.ValidationError):
        fields = flatten_errors(exc.detail)
        first = next(iter(fields.values()), ["Invalid input."])[0]
        body = {"code": "invalid", "message": f"Invalid input: {first}" if fields else "Invalid input.", "fields": fields}
    elif isinstance(exc, exceptions.Throttled):
        body = {"code": "throttled", "message": str(exc.detail), "fields": {}, "retry_after": exc.wait}  # type: ignore[attr-defined]  # set by Throttled.__init__; the stubs leave it out
    elif isinstance(exc, exceptions.APIException):
        detail = exc.detail
        codes = exc.get_codes()
        body = {
            "code": codes if isinstance(codes, str) else exc.default_code,
            "message": str(detail) if not isinstance(detail, (list, dict)) else str(exc.default_detail),
            "fields": {},
        }
    else:  # pragma: no cover - DRF only handles APIException, Http404, PermissionDenied
        body = {"code": "error", "message": str(exc), "fields": {}}
    response.data = {"error": body}
    return response


@csrf_exempt  # it changes nothing; without this a POST would get Django's HTML CSRF page
def api_not_found(request: Any, *args: Any, **kwargs: Any) -> Any:
    """Any /api/ URL that no route matches (a negative id, a typo): the JSON 404 every
    API error has, instead of Django's HTML page."""
    from django.http import JsonResponse

    return JsonResponse({"error": {"code": "not_found", "message": "No such API endpoint.", "fields": {}}}, status=404)


MAX_PAGE_SIZE = 500
DEFAULT_PAGE_SIZE = 50


def page_size_from(request: Any, default: int = DEFAULT_PAGE_SIZE, maximum: int = MAX_PAGE_SIZE) -> int:
    """``?page_size=`` of ``request``: an integer from 1 to ``maximum``, ``default`` when
    absent. Anything else (0, negative, not an integer, over ``maximum``) raises a 400
    with a ``page_size`` field error: a size is never clamped or ignored silently."""
    raw = request.query_params.get("page_size")
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 6 and 1 <= int(raw) <= maximum):
        message = f"Must be a whole number from 1 to {maximum}; got {raw[:20]!r}."
        raise bad_request("invalid", f"Invalid input: page_size: {message}", {"page_size": [message]})
    return int(raw)


class Pagination(PageNumberPagination):
    """``?page=N&page_size=M`` (1 to 500; else 400); body ``{"count", "next", "previous",
    "results"}``. For lists that stay small (graphs, versions, approvals, cost rows);
    lists that grow without bound page by cursor (:class:`CursorPage`)."""

    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE

    def get_page_size(self, request: Any) -> int:
        return page_size_from(request)


class CursorPage(CursorPagination):
    """Keyset pagination of a list that grows without bound (runs, steps, audit entries):
    ``?cursor=<opaque>&page_size=M`` (1 to 500, default 50; else 400). Body
    ``{"next", "previous", "results"}``: ``next``/``previous`` are URLs carrying the
    cursor (null at either end); no ``count``, so a page costs one indexed range query
    whatever the table's size, and rows added meanwhile never shift a page.

    ``ordering`` is one unique column (``"-id"`` newest first, ``"id"`` oldest first),
    so a cursor is the last id seen, and every cursor this class hands out holds one. A
    cursor it could not have handed out is a 400 with a ``cursor`` field error: one that
    does not decode, holds no id (``AAAA`` decodes to nothing, which DRF reads as the
    first page), or is not the exact text this class encodes for what it holds (a
    truncated or edited one)."""

    page_size = DEFAULT_PAGE_SIZE
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE

    def __init__(self, ordering: str = "-id"):
        self.ordering = ordering

    def get_page_size(self, request: Any) -> int:
        return page_size_from(request)

    def decode_cursor(self, request: Any) -> Any:
        message = "Not a cursor of this list: use the next or previous URL of a page."
        invalid = bad_request("invalid", f"Invalid input: {message}", {"cursor": [message]})
        try:
            cursor = super().decode_cursor(request)
        except exceptions.NotFound:
            raise invalid from None
        if cursor is None:
            return None
        # The query string's text (the stubs say int).
        position = None if cursor.position is None else str(cursor.position)
        if position is None or not (position.isascii() and position.isdigit() and int(position) <= MAX_ID):
            raise invalid
        if _encoded(cursor) != request.query_params.get(self.cursor_query_param):
            raise invalid
        return cursor


def _encoded(cursor: Any) -> str:
    """The cursor text DRF's ``CursorPagination.encode_cursor`` puts in a link for ``cursor``
    (the same tokens in the same order, base64): what a cursor handed out reads as."""
    tokens = {}
    if cursor.offset != 0:
        tokens["o"] = str(cursor.offset)
    if cursor.reverse:
        tokens["r"] = "1"
    tokens["p"] = cursor.position
    return b64encode(urlencode(tokens).encode("ascii")).decode("ascii")


class ApiView(APIView):
    """Base of every API view: ids in the path bounded, and the request's principal set
    for the audit entries its services write (a token user is audited as ``token``, by
    the hook registered with :func:`core.principals.register_request_principal`)."""

    #: Permission classes required per HTTP method, on top of IsAuthenticated.
    method_permissions: dict[str, list[Any]] = {}
    #: The settings' DEFAULT_PERMISSION_CLASSES (a list), which views extend with ``+ [...]``.
    permission_classes: list[type[BasePermission]]

    def get_permissions(self) -> list[Any]:
        method = "GET" if self.request.method == "HEAD" else self.request.method or ""
        return list(super().get_permissions()) + [p() for p in self.method_permissions.get(method, [])]

    def validated(self, serializer_class: Any, data: Any, **context: Any) -> dict[str, Any]:
        """``data`` validated by ``serializer_class`` (raises ValidationError -> 400)."""
        serializer = serializer_class(data=data, context={"request": self.request, **context})
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def dispatch(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        principal = principals.request_principal()
        handle = principal.enter()
        try:
            return super().dispatch(request, *args, **kwargs)
        finally:
            principal.leave(handle)

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        for value in kwargs.values():
            if isinstance(value, int) and not 0 <= value <= MAX_ID:
                raise exceptions.NotFound()
        super().initial(request, *args, **kwargs)
        principals.request_principal().authenticated(request)

    def paginate(self, queryset: Any, serializer_class: Any, *, prepare: Any = None, **context: Any) -> Response:
        """A numbered page of ``queryset`` serialised with ``serializer_class`` (:class:`Pagination`);
        ``prepare(page)``, when given, bulk-loads what the serializer reads for the page's rows."""
        paginator = Pagination()
        page: list[Any] | None = paginator.paginate_queryset(queryset, self.request, view=self)
        if prepare is not None and page:
            prepare(page)
        data = serializer_class(page, many=True, context={"request": self.request, **context}).data
        return paginator.get_paginated_response(data)

    def paginate_cursor(self, queryset: Any, serializer_class: Any, *, ordering: str = "-id", **context: Any) -> Response:
        """A keyset page of ``queryset`` in ``ordering`` (a unique column, :class:`CursorPage`),
        serialised with ``serializer_class``. ``queryset`` may come filtered (by a
        selector, a read policy); the page orders it itself."""
        paginator = CursorPage(ordering=ordering)
        page: list[Any] | None = paginator.paginate_queryset(queryset, self.request, view=self)
        data = serializer_class(page, many=True, context={"request": self.request, **context}).data
        return paginator.get_paginated_response(data)


_PAGES: dict[str, Any] = {}


def paginated(serializer_class: Any, name: str) -> Any:
    """Schema of a numbered page of ``serializer_class`` items (for extend_schema
    responses); one component per ``name``."""
    if name not in _PAGES:
        _PAGES[name] = _page(serializer_class, name)
    return _PAGES[name]


def cursor_paginated(serializer_class: Any, name: str) -> Any:
    """Schema of a keyset page (:class:`CursorPage`) of ``serializer_class`` items."""
    key = f"cursor:{name}"
    if key not in _PAGES:
        _PAGES[key] = inline_serializer(
            name=f"Cursor{name}Page",
            fields={
                "next": serializers.CharField(allow_null=True, help_text="URL of the next page (null on the last)."),
                "previous": serializers.CharField(allow_null=True, help_text="URL of the previous page (null on the first)."),
                "results": serializer_class(many=True),
            },
        )
    return _PAGES[key]


def _page(serializer_class: Any, name: str) -> Any:
    return inline_serializer(
        name=f"Paginated{name}List",
        fields={
            "count": serializers.IntegerField(),
            "next": serializers.CharField(allow_null=True),
            "previous": serializers.CharField(allow_null=True),
            "results": serializer_class(many=True),
        },
    )


PAGE_PARAMETERS = [
    OpenApiParameter("page", int, description="Page number (1-based)."),
    OpenApiParameter("page_size", int, description="Items per page: 1 to 500 (default 50); anything else is a 400."),
]
CURSOR_PARAMETERS = [
    OpenApiParameter("cursor", str, description="Opaque position: take it from a page's next or previous URL."),
    OpenApiParameter("page_size", int, description="Items per page: 1 to 500 (default 50); anything else is a 400."),
]


ERROR_BODY = inline_serializer(
    name="ErrorBody",
    fields={
        "error": inline_serializer(
            name="Error",
            fields={
                "code": serializers.CharField(),
                "message": serializers.CharField(),
                "fields": serializers.DictField(child=serializers.ListField(child=serializers.CharField())),
            },
        )
    },
)

_ERROR_STATUSES = {
    "400": "Invalid input (see error.fields).",
    "401": "Not authenticated.",
    "403": "Not allowed.",
    "404": "Not found.",
    "405": "Method not allowed.",
    "406": "Not acceptable.",
    "415": "Unsupported media type.",
    "429": "Too many requests: the token's or user's rate, or too many failed token authentications (see Retry-After).",
}


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: document the error body for the error statuses
    every operation can answer with (views declare their own 409/422 where they have them)."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault(
        "Error",
        {
            "type": "object",
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "fields": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
            },
            "required": ["code", "message", "fields"],
        },
    )
    schemas.setdefault(
        "ErrorBody",
        {"type": "object", "properties": {"error": {"$ref": "#/components/schemas/Error"}}, "required": ["error"]},
    )
    ref = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if method not in {"get", "post", "put", "patch", "delete"}:
                continue
            responses = operation.setdefault("responses", {})
            for code, description in _ERROR_STATUSES.items():
                response = {"description": description, "content": ref}
                if code == "429":
                    response["headers"] = {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait."}}
                responses.setdefault(code, response)
    return result
