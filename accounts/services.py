"""User and group writes for the app's administration pages: create, invite, (de)activate, set groups and members; each audited in its transaction.

Django admin keeps working on the same rows; these services are what the REST API
(``accounts.apis``) calls, so every change made in the app is a hash-chained audit entry
in the chain of the user (``user:<id>``, beside their token events) or the group
(``group:<id>``), written in the same transaction as the change.
"""
from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.tokens import default_token_generator
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db import transaction
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from audit.chain import audit
from core.errors import ConflictError, ForbiddenError, ServiceError


class AccountInvalid(ServiceError):
    """Bad input for a user or group write: 400 with the field at fault."""

    code = "invalid"


class AccountConflict(ConflictError):
    """A username or group name that is taken: 409 with the field at fault."""

    code = "name_taken"


class NotSuperuser(ForbiddenError):
    """A staff user who is not a superuser acted on a staff or superuser account: 403."""


def require_may_manage(*, by: Any, user: Any) -> None:
    """Raise NotSuperuser unless ``by`` may change ``user``'s account or act as them (an
    invite link, a token for them): a staff or superuser account only by a superuser, so
    a staff user cannot take over an account with more rights than theirs; anyone else
    by any staff user (the caller checks ``by`` is staff)."""
    if (user.is_staff or user.is_superuser) and not by.is_superuser and user.pk != by.pk:
        raise NotSuperuser(f"{by.get_username()} may not change {user.get_username()}: only a superuser may change a staff or superuser account.")


def _invalid(field: str, message: str) -> AccountInvalid:
    return AccountInvalid(f"Invalid input: {field}: {message}", fields={field: [message]})


def invite_path(user: Any) -> str:
    """The path of a one-time link that lets ``user`` choose a password: Django's password
    reset confirmation (``/accounts/reset/<uidb64>/<token>/``), the same mechanism as a
    reset by email. The token is valid for PASSWORD_RESET_TIMEOUT and stops working once
    the password changes (it is derived from the password hash and the last login)."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    return reverse("password_reset_confirm", kwargs={"uidb64": uid, "token": default_token_generator.make_token(user)})


def user_create(
    *,
    username: str,
    email: str = "",
    password: str | None = None,
    groups: list[Group] | tuple[Group, ...] = (),
    first_name: str = "",
    last_name: str = "",
    by: Any,
) -> Any:
    """Create an active, non-staff user (audited ``user.create`` as ``by``).

    ``password`` None: no usable password; the caller hands out :func:`invite_path`. A
    password is checked by AUTH_PASSWORD_VALIDATORS (400 naming ``password``). A taken
    username (case-insensitive) is 409 naming ``username``. Returns the user."""
    User = get_user_model()
    try:
        UnicodeUsernameValidator()(username)
    except ValidationError as exc:
        raise _invalid("username", exc.messages[0]) from None
    candidate = User(username=username, email=email, first_name=first_name, last_name=last_name)
    if password is not None:
        try:
            validate_password(password, user=candidate)
        except ValidationError as exc:
            raise AccountInvalid(f"Invalid input: password: {exc.messages[0]}", fields={"password": list(exc.messages)}) from None
    with transaction.atomic():
        if User.objects.filter(username__iexact=username).exists():
            raise AccountConflict(f"username: {username!r} is taken.", fields={"username": [f"{username!r} is taken."]})
        user = User.objects.create_user(username=username, email=email, password=password, first_name=first_name, last_name=last_name)
        if groups:
            user.groups.set(groups)
        audit(by.get_username(), "user.create", user, username=username, email=email,
              groups=sorted(g.name for g in groups), invited=password is None)
    return user


def user_update(*, user: Any, by: Any, is_active: bool | None = None, groups: list[Group] | None = None,
                email: str | None = None, first_name: str | None = None, last_name: str | None = None) -> Any:
    """Change a user's active flag, groups, email or names (each given field; None keeps
    it). A staff or superuser account needs a superuser (:func:`require_may_manage`, 403).
    Deactivating yourself is refused (400 naming ``is_active``): an admin must not lock
    themself out. Audited ``user.update`` with what changed (nothing changed: no entry).
    A deactivated user's session ends at their next request and their API tokens stop
    authenticating (``token_for_key`` checks ``is_active``). Returns the user."""
    require_may_manage(by=by, user=user)
    if is_active is False and user.pk == by.pk:
        raise _invalid("is_active", "You cannot deactivate yourself.")
    with transaction.atomic():
        user = type(user).objects.select_for_update().get(pk=user.pk)
        changes: dict[str, Any] = {}
        for name, value in (("is_active", is_active), ("email", email), ("first_name", first_name), ("last_name", last_name)):
            if value is not None and getattr(user, name) != value:
                changes[name] = value
                setattr(user, name, value)
        if changes:
            user.save(update_fields=list(changes))
        if groups is not None:
            before = sorted(user.groups.values_list("name", flat=True))
            after = sorted(g.name for g in groups)
            if before != after:
                user.groups.set(groups)
                changes["groups"] = after
        if changes:
            audit(by.get_username(), "user.update", user, username=user.get_username(), **changes)
    return user


def user_invite(*, user: Any, by: Any) -> str:
    """A fresh invite (set-password) link path for ``user`` (audited ``user.invite``; the
    link itself is not recorded). Refused for an inactive user (400 naming ``is_active``);
    for a staff or superuser account unless ``by`` is a superuser (403): the link sets the
    account's password, so it is a way into the account."""
    require_may_manage(by=by, user=user)
    if not user.is_active:
        raise _invalid("is_active", "Reactivate the user first.")
    with transaction.atomic():
        audit(by.get_username(), "user.invite", user, username=user.get_username())
    return invite_path(user)


def group_create(*, name: str, members: list[Any] | tuple[Any, ...] = (), by: Any) -> Group:
    """Create a group (a role when named builders, operators or approvers), with
    ``members``. A taken name (case-insensitive) is 409 naming ``name``. Audited
    ``group.create``. Returns the group."""
    name = name.strip()
    if not name:
        raise _invalid("name", "A group needs a name.")
    with transaction.atomic():
        if Group.objects.filter(name__iexact=name).exists():
            raise AccountConflict(f"name: {name!r} is taken.", fields={"name": [f"{name!r} is taken."]})
        group = Group.objects.create(name=name)
        if members:
            group.user_set.set(members)
        audit(by.get_username(), "group.create", group, name=name, members=sorted(u.get_username() for u in members))
    return group


def group_set_members(*, group: Group, members: list[Any], by: Any) -> Group:
    """Make ``members`` the group's members (audited ``group.members`` with who was added
    and removed; no change: no entry). Returns the group."""
    with transaction.atomic():
        group = Group.objects.select_for_update().get(pk=group.pk)
        before = set(group.user_set.values_list("username", flat=True))
        after = {u.get_username() for u in members}
        if before != after:
            group.user_set.set(members)
            audit(by.get_username(), "group.members", group, name=group.name,
                  added=sorted(after - before), removed=sorted(before - after))
    return group
