"""DRF fields and helpers every app's serializers share: a JSON object field (no NUL, only finite numbers) and the tree's writable context."""
from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from core.fields import field_path
from runs.sandbox import values
from runs.sandbox.values import non_finite_locations, non_finite_message


def has_nul(value: Any) -> bool:
    """Whether a JSON value holds a NUL character in any string or key (PostgreSQL's
    jsonb refuses them; checked before anything is stored). Iterative: no recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def writable_context(serializer: serializers.BaseSerializer[Any]) -> MutableMapping[str, Any]:
    """The context a serializer shares with its whole tree (DRF hands every nested
    serializer its root's dict), for a list serializer to fill once per page. The stubs type
    ``context`` read-only; TypeError if the caller passed a read-only mapping."""
    context = serializer.context
    if not isinstance(context, MutableMapping):
        raise TypeError(f"{type(serializer).__name__}: the serializer context is read-only")
    return context


@extend_schema_field(OpenApiTypes.OBJECT)
class JSONObjectField(serializers.JSONField):
    """A JSON object (dict) without NUL characters or numbers that are not finite (the
    body parser reads ``1e999`` as Infinity: not a JSON number, and no JSON column
    stores it); anything else is a field error naming where (``position.x: ...``)."""

    default_error_messages = {"not_object": "Must be a JSON object.", "nul": "Strings may not contain NUL (\\u0000) characters."}

    def to_internal_value(self, data: Any) -> Any:
        numbers = non_finite_locations(data)  # before DRF's own check, which says only "Value must be valid JSON."
        if numbers:
            raise serializers.ValidationError(
                [f"{field_path(loc) or '(value)'}: {non_finite_message(number)}" for loc, number in numbers], code="not_finite"
            )
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            self.fail("not_object")
        if has_nul(value):
            try:
                values.check(value)
            except values.InvalidValue as exc:  # say where: "notes.text: Strings may not ..."
                raise serializers.ValidationError(f"{exc.path}: {self.error_messages['nul']}" if exc.path else self.error_messages["nul"], code="nul") from None
            self.fail("nul")
        return value


class EngineErrorOutput(serializers.Serializer):
    """A step's or run's error as the engine records it (runs.vocabulary.NodeError.as_dict and
    the run-level stops): every key optional, others may appear."""

    code = serializers.CharField(required=False)
    message = serializers.CharField(required=False)
    retryable = serializers.BooleanField(required=False)
    type = serializers.CharField(required=False)
    node_id = serializers.CharField(required=False)
    details = serializers.JSONField(required=False)


@extend_schema_field(EngineErrorOutput(allow_null=True))
class EngineErrorField(serializers.JSONField):
    """An output field holding an engine error (null: none); returned as stored."""


class UsageOutput(serializers.Serializer):
    """Token usage as recorded (runs.vocabulary.Usage.as_dict; summed over an agent's turns):
    every key optional (older rows carry fewer)."""

    provider = serializers.CharField(required=False)
    model = serializers.CharField(required=False)
    input_tokens = serializers.IntegerField(required=False)
    output_tokens = serializers.IntegerField(required=False)
    cached_input_tokens = serializers.IntegerField(required=False)
    reasoning_tokens = serializers.IntegerField(required=False)
    cache_write_tokens = serializers.IntegerField(required=False)
    cache_write_1h_tokens = serializers.IntegerField(required=False)
    price_version = serializers.CharField(required=False)


@extend_schema_field(UsageOutput(allow_null=True))
class UsageField(serializers.JSONField):
    """An output field holding token usage (null: none); returned as stored."""

