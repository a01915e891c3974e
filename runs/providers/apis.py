"""Provider API views: the catalogue every node form reads, and staff-only create, update, delete and connection test of providers added in the app.

``GET /providers/`` lists every provider a node may name (settings, environment, app),
never a key. Writes need a staff user; an API key is write-only: it is accepted by POST
and PATCH and never returned by anything.
"""
from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from accounts.authentication import IsAdmin
from core.api import ERROR_BODY, ApiError, ApiView, bad_request, conflict
from runs.models import ProviderCredential, ProviderKind
from runs.providers import UnknownProvider, get_provider, services
from runs.providers import credentials as store

TAG = ["providers"]
SOURCES = ("settings", "environment", "app")
CONFLICT = OpenApiResponse(ERROR_BODY, description="The name is taken, or the provider is configured in settings and cannot be changed here.")


# --------------------------------------------------------------------------- serializers


class ProviderOutput(serializers.Serializer):
    """One provider a node may name. Never carries a key."""

    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=["mock", *ProviderKind.values, "custom"])
    label = serializers.CharField()  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    models = serializers.ListField(child=serializers.CharField(), help_text="Models offered; empty: any model name.")
    default_model = serializers.CharField(allow_null=True)
    base_url = serializers.CharField(allow_null=True)
    source = serializers.ChoiceField(choices=SOURCES, help_text="Where it is configured: settings.py, environment variables, or the app.")  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    ready = serializers.BooleanField(help_text="Whether an API key is available (or none is needed).")


class _CredentialFields(serializers.Serializer):
    kind = serializers.ChoiceField(choices=ProviderKind.choices)
    label = serializers.CharField(max_length=200, required=False, allow_blank=True)  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class
    base_url = serializers.CharField(max_length=500, required=False, allow_blank=True, help_text="API root; required for openai_compatible (e.g. http://127.0.0.1:11434/v1).")
    api_key = serializers.CharField(
        max_length=store.MAX_KEY_CHARS,
        required=False,
        allow_blank=True,
        write_only=True,
        help_text="Write-only: stored encrypted, never returned. On PATCH, absent keeps the stored key and \"\" removes it.",
    )
    default_model = serializers.CharField(max_length=200)
    models = serializers.ListField(child=serializers.CharField(max_length=200), max_length=store.MAX_MODELS, required=False)


class ProviderCreateInput(_CredentialFields):
    """POST /providers/: a provider added in the app."""

    name = serializers.CharField(max_length=64, help_text="What nodes write as their provider; letters, digits, '.', '_', '-'.")


class ProviderUpdateInput(_CredentialFields):
    """PATCH /providers/<name>/: the fields to change (the name cannot change)."""

    name = serializers.CharField(max_length=64, required=False, help_text="Cannot change: anything but the current name is refused.")

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.required = False


class ProviderTestInput(serializers.Serializer):
    """POST /providers/<name>/test/: which model to ask (default: the provider's default model)."""

    model = serializers.CharField(max_length=200, required=False)


class ProviderTestError(serializers.Serializer):
    code = serializers.CharField()
    status = serializers.IntegerField(required=False)


class ProviderTestOutput(serializers.Serializer):
    """The outcome of a 1-token completion through the provider's SDK. A provider that
    refuses (bad key, unknown model, unreachable) is ``ok: false`` with its own message
    (keys redacted), not an HTTP error of this API."""

    ok = serializers.BooleanField()
    provider = serializers.CharField()
    model = serializers.CharField()
    message = serializers.CharField()
    latency_ms = serializers.IntegerField()
    error = ProviderTestError(allow_null=True)


# --------------------------------------------------------------------------- helpers


def _stored(name: str) -> ProviderCredential:
    """The stored credential ``name``: 409 for a settings/environment name, else 404."""
    if name in settings.BALLAST_PROVIDERS:
        raise conflict("configured_in_settings", f"Provider {name!r} is configured in settings or the environment; change it there.")
    credential = ProviderCredential.objects.filter(name=name).first() if store.NAME_PATTERN.match(name) else None
    if credential is None:
        raise ApiError(status.HTTP_404_NOT_FOUND, "not_found", f"No provider named {name!r}.")
    return credential


def _invalid(exc: store.CredentialInvalid) -> ApiError:
    fields = {("models" if k == "model_names" else k): v for k, v in exc.fields.items()}
    first = next(iter(fields.items()))
    message = f"{first[0]}: {first[1][0]}"
    if exc.code == "name_taken":
        return conflict("name_taken", message, fields)
    return bad_request("invalid", f"Invalid input: {message}", fields)


def _service_data(data: dict[str, Any]) -> dict[str, Any]:
    out = dict(data)
    if "models" in out:
        out["model_names"] = out.pop("models")
    return out


# --------------------------------------------------------------------------- views


class ProviderCollectionApi(ApiView):
    """GET: every provider a node may name (any user). POST: add one (staff)."""

    method_permissions = {"POST": [IsAdmin]}

    @extend_schema(tags=TAG, operation_id="providers_list", responses=ProviderOutput(many=True))
    def get(self, request: Any) -> Response:
        return Response(ProviderOutput(store.provider_catalogue(), many=True).data)

    @extend_schema(tags=TAG, operation_id="providers_create", request=ProviderCreateInput, responses={201: ProviderOutput, 409: CONFLICT})
    def post(self, request: Any) -> Response:
        data = self.validated(ProviderCreateInput, request.data)
        try:
            credential = services.provider_credential_create(data=_service_data(data), user=request.user)
        except store.CredentialInvalid as exc:
            raise _invalid(exc) from None
        return Response(ProviderOutput(store.catalogue_item(credential)).data, status=status.HTTP_201_CREATED)


class ProviderDetailApi(ApiView):
    """PATCH: change a provider added in the app; DELETE: remove it (staff). Providers
    configured in settings or the environment answer 409."""

    permission_classes = ApiView.permission_classes + [IsAdmin]

    @extend_schema(tags=TAG, operation_id="providers_update", request=ProviderUpdateInput, responses={200: ProviderOutput, 409: CONFLICT})
    def patch(self, request: Any, name: str) -> Response:
        credential = _stored(name)
        data = self.validated(ProviderUpdateInput, request.data)
        try:
            credential = services.provider_credential_update(credential=credential, data=_service_data(data), user=request.user)
        except store.CredentialInvalid as exc:
            raise _invalid(exc) from None
        except ProviderCredential.DoesNotExist:
            raise ApiError(status.HTTP_404_NOT_FOUND, "not_found", f"No provider named {name!r}.") from None
        return Response(ProviderOutput(store.catalogue_item(credential)).data)

    @extend_schema(tags=TAG, operation_id="providers_delete", request=None, responses={204: None, 409: CONFLICT})
    def delete(self, request: Any, name: str) -> Response:
        if not services.provider_credential_delete(credential=_stored(name), user=request.user):
            raise ApiError(status.HTTP_404_NOT_FOUND, "not_found", f"No provider named {name!r}.")
        return Response(status=status.HTTP_204_NO_CONTENT)


class ProviderTestApi(ApiView):
    """POST: a 1-token completion through the provider's real SDK, bounded by
    BALLAST_PROVIDER_TEST_TIMEOUT (staff). Works for every provider in the catalogue."""

    permission_classes = ApiView.permission_classes + [IsAdmin]

    @extend_schema(tags=TAG, operation_id="providers_test", request=ProviderTestInput, responses=ProviderTestOutput)
    def post(self, request: Any, name: str) -> Response:
        data = self.validated(ProviderTestInput, request.data)
        if name not in settings.BALLAST_PROVIDERS:
            result = store.stored_connection_test(_stored(name), model=data.get("model"))
            return Response(ProviderTestOutput(result.as_dict()).data)
        try:
            provider = get_provider(name)
        except UnknownProvider:  # pragma: no cover - the name is in settings
            raise ApiError(status.HTTP_404_NOT_FOUND, "not_found", f"No provider named {name!r}.") from None
        model = data.get("model") or store.default_model_of(provider)
        if model is None:
            raise bad_request("invalid", "Invalid input: model: required (this provider has no default model).", {"model": ["Required: this provider has no default model."]})
        return Response(ProviderTestOutput(store.connection_test(provider, model=model).as_dict()).data)
