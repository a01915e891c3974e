"""Who may read what the probes keep back: an administrator's API token, checked without DRF's views (``/readyz?detail=1``, ``/metrics``)."""
from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from rest_framework import exceptions
from rest_framework.request import Request

from accounts.authentication import TokenAuthentication, is_admin


def _error(status: int, code: str, message: str, **headers: str) -> JsonResponse:
    """An error in the API's shape (``{"error": {"code", "message", "fields"}}``), no detail."""
    response = JsonResponse({"error": {"code": code, "message": message, "fields": {}}}, status=status)
    response["Cache-Control"] = "no-store"
    for name, value in headers.items():
        response[name.replace("_", "-")] = value
    return response


def admin_token_refusal(request: HttpRequest, *, what: str = "the readiness detail") -> JsonResponse | None:
    """None when the request carries an administrator's valid API token; else the error to
    answer (``what`` names what the token is for): 401 without a token or with a bad one
    (counted and audited as every failed token is,
    ``accounts.authentication.TokenAuthentication``), 429 past the rate of failures, 403
    for a valid token of a user who is not staff. The body never carries what was asked."""
    auth = TokenAuthentication()
    challenge = auth.authenticate_header(request)
    try:
        result = auth.authenticate(Request(request))
    except exceptions.Throttled as exc:
        return _error(429, "throttled", str(exc.detail), Retry_After=str(int(getattr(exc, "wait", None) or 1)))
    except exceptions.AuthenticationFailed as exc:
        return _error(401, "authentication_failed", str(exc.detail), WWW_Authenticate=challenge)
    if result is None:
        return _error(401, "not_authenticated", f"An API token is needed for {what}: 'Authorization: Token <key>'.", WWW_Authenticate=challenge)
    if not is_admin(result[0]):
        return _error(403, "permission_denied", f"Only administrators may see {what}.")
    return None
