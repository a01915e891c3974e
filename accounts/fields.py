"""Serializer fields that name accounts: usernames and group names, read as users and groups (an unknown name is a field error)."""
from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from rest_framework import serializers


class UsernamesField(serializers.ListField):
    """A list of usernames, turned into users in the order given, duplicates dropped (an
    unknown name is a field error naming it)."""

    child = serializers.CharField(max_length=150)

    def to_internal_value(self, data: Any) -> list[Any]:
        names = super().to_internal_value(data)
        users = {u.get_username(): u for u in get_user_model().objects.filter(username__in=names)}
        missing = sorted(set(names) - set(users))
        if missing:
            raise serializers.ValidationError(f"Unknown user(s): {', '.join(missing)}.")
        return [users[n] for n in dict.fromkeys(names)]


class GroupNamesField(serializers.ListField):
    """A list of group names, turned into groups in the order given, duplicates dropped (an
    unknown name is a field error naming it)."""

    child = serializers.CharField(max_length=150)

    def to_internal_value(self, data: Any) -> list[Any]:
        names = super().to_internal_value(data)
        groups = {g.name: g for g in Group.objects.filter(name__in=names)}
        missing = sorted(set(names) - set(groups))
        if missing:
            raise serializers.ValidationError(f"Unknown group(s): {', '.join(missing)}.")
        return [groups[n] for n in dict.fromkeys(names)]
