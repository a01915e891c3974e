"""Account API views: API tokens (every user their own; staff anyone's), users and groups (staff), and the user and group picker's search.

Tokens: the key is in the answer to the POST that creates it and nowhere else (only its
SHA-256 is stored). Users and groups: staff only (403 for anyone else, 401 anonymous).
Every write goes through ``accounts.tokens`` or ``accounts.services``, which audit it in
the same transaction.
"""
from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Prefetch, Q
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, permissions, serializers, status
from rest_framework.response import Response

from accounts import services
from accounts.authentication import IsAdmin
from accounts.fields import GroupNamesField, UsernamesField
from accounts.models import ApiToken
from accounts.roles import BUILDERS, ROLES, has_role, is_admin
from accounts.tokens import token_create, token_revoke
from core.api import ERROR_BODY, PAGE_PARAMETERS, ApiView, bad_request, paginated

TAG_TOKENS = ["tokens"]
TAG_USERS = ["users"]
CONFLICT = OpenApiResponse(ERROR_BODY, description="The name is taken.")
#: How many principals one search answers (the picker shows a short list as you type).
PRINCIPALS_LIMIT = 20


# --------------------------------------------------------------------------- serializers


class TokenOutput(serializers.Serializer):
    """One API token as lists show it: never its key."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The key's first 12 characters: names the token in lists and the audit log.")
    user = serializers.CharField(source="user.username")
    created_at = serializers.DateTimeField()
    created_by = serializers.CharField(source="created_by_name")
    last_used_at = serializers.DateTimeField(allow_null=True, help_text="Last authenticated request (recorded at most once a minute).")
    revoked_at = serializers.DateTimeField(allow_null=True)
    revoked_by = serializers.CharField(source="revoked_by_name")


class TokenCreatedOutput(TokenOutput):
    """The answer to creating a token: the only time its key is shown."""

    key = serializers.CharField(help_text="The secret: shown in this answer only, never stored.")


class TokenCreateInput(serializers.Serializer):
    """POST /tokens/: a name to tell the token apart; staff may create one for another user."""

    name = serializers.CharField(max_length=200, help_text="What the token is for (e.g. 'CI pipeline').")
    user = serializers.CharField(max_length=150, required=False, help_text="Username of its owner (staff only; default: you).")


class UserOutput(serializers.Serializer):
    """A user as the administration page lists them."""

    id = serializers.IntegerField()
    username = serializers.CharField()
    email = serializers.CharField()
    first_name = serializers.CharField()
    last_name = serializers.CharField()
    is_active = serializers.BooleanField()
    is_staff = serializers.BooleanField()
    is_superuser = serializers.BooleanField()
    has_password = serializers.SerializerMethodField(help_text="False for an invited user who has not chosen a password yet.")
    groups = serializers.SerializerMethodField()
    date_joined = serializers.DateTimeField()
    last_login = serializers.DateTimeField(allow_null=True)

    def get_groups(self, obj: Any) -> list[str]:
        return sorted(g.name for g in obj.groups.all())

    def get_has_password(self, obj: Any) -> bool:
        return bool(obj.has_usable_password())


class UserCreatedOutput(UserOutput):
    invite_url = serializers.CharField(allow_null=True, help_text="Set-password link for an invited user (shown once); null when a password was given.")


class UserCreateInput(serializers.Serializer):
    """POST /users/: a password, or ``invite: true`` for a link that lets the user choose one."""

    username = serializers.CharField(max_length=150)
    email = serializers.EmailField(required=False, allow_blank=True, default="")
    first_name = serializers.CharField(max_length=150, required=False, allow_blank=True, default="")
    last_name = serializers.CharField(max_length=150, required=False, allow_blank=True, default="")
    password = serializers.CharField(max_length=128, required=False, write_only=True, trim_whitespace=False)
    invite = serializers.BooleanField(required=False, default=False, help_text="No password: answer with a one-time set-password link.")
    groups = GroupNamesField(required=False, default=list)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("invite") and attrs.get("password"):
            raise serializers.ValidationError({"password": ["Give a password or invite, not both."]})
        if not attrs.get("invite") and not attrs.get("password"):
            raise serializers.ValidationError({"password": ["Give an initial password, or invite the user to choose one."]})
        return attrs


class UserUpdateInput(serializers.Serializer):
    """PATCH /users/<id>/: any subset."""

    is_active = serializers.BooleanField(required=False)
    email = serializers.EmailField(required=False, allow_blank=True)
    first_name = serializers.CharField(max_length=150, required=False, allow_blank=True)
    last_name = serializers.CharField(max_length=150, required=False, allow_blank=True)
    groups = GroupNamesField(required=False)


class InviteOutput(serializers.Serializer):
    invite_url = serializers.CharField(help_text="Set-password link (one use; valid for PASSWORD_RESET_TIMEOUT).")


class GroupOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    members = serializers.SerializerMethodField()
    is_role = serializers.SerializerMethodField(help_text="One of the roles Ballast checks: builders, operators, approvers.")

    def get_members(self, obj: Group) -> list[str]:
        return sorted(u.get_username() for u in obj.user_set.all())

    def get_is_role(self, obj: Group) -> bool:
        return obj.name in ROLES


class GroupCreateInput(serializers.Serializer):
    name = serializers.CharField(max_length=150)
    members = UsernamesField(required=False, default=list)


class GroupUpdateInput(serializers.Serializer):
    members = UsernamesField()


class SearchQuery(serializers.Serializer):
    """``?q=`` of the user list and the principal search (a NUL or an over-long text is a 400)."""

    q = serializers.CharField(required=False, allow_blank=True, max_length=150, default="")
    kind = serializers.ChoiceField(choices=["user", "group"], required=False, allow_blank=True, default="")


class PrincipalOutput(serializers.Serializer):
    """A user or a group a picker offers."""

    kind = serializers.ChoiceField(choices=["user", "group"])
    name = serializers.CharField(help_text="Username or group name: what a graph or an approval node stores.")
    label = serializers.CharField()  # type: ignore[assignment]  # an API field named like a DRF attribute: the metaclass takes fields off the class


class PrincipalsOutput(serializers.Serializer):
    results = PrincipalOutput(many=True)


# --------------------------------------------------------------------------- helpers


def _user_or_404(user_id: int) -> Any:
    # ObjectDoesNotExist -> 404 (core.api).
    return get_user_model().objects.get(pk=user_id)


def _users() -> Any:
    return get_user_model().objects.prefetch_related(Prefetch("groups", queryset=Group.objects.order_by("name")))


def _absolute(request: Any, path: str) -> str:
    return request.build_absolute_uri(path)


class IsBuilderOrAdmin(permissions.BasePermission):
    """Builders (who name a graph's operators and approvers) and staff."""

    message = "Only builders and administrators may search users and groups."

    def has_permission(self, request: Any, view: Any) -> bool:
        return is_admin(request.user) or has_role(request.user, BUILDERS)


# --------------------------------------------------------------------------- tokens


class TokenCollectionApi(ApiView):
    """GET: your tokens (staff: ``?all=true`` lists everyone's). POST: create one; its key
    is in this answer only."""

    @extend_schema(
        tags=TAG_TOKENS, operation_id="tokens_list", responses=paginated(TokenOutput, "Token"),
        parameters=[OpenApiParameter("all", bool, description="Staff: every user's tokens (else 403)."), *PAGE_PARAMETERS],
    )
    def get(self, request: Any) -> Response:
        tokens = ApiToken.objects.select_related("user").order_by("-id")
        if request.query_params.get("all") in ("true", "1"):
            if not is_admin(request.user):
                raise exceptions.PermissionDenied("Only administrators may list every user's tokens.")
        else:
            tokens = tokens.filter(user=request.user)
        return self.paginate(tokens, TokenOutput)

    @extend_schema(tags=TAG_TOKENS, operation_id="tokens_create", request=TokenCreateInput, responses={201: TokenCreatedOutput})
    def post(self, request: Any) -> Response:
        data = self.validated(TokenCreateInput, request.data)
        owner = request.user
        name = data.get("user")
        if name and name != request.user.get_username():
            if not is_admin(request.user):
                raise exceptions.PermissionDenied("Only administrators may create tokens for another user.")
            owner = get_user_model().objects.filter(username=name).first()
            if owner is None:
                raise bad_request("invalid", f"Invalid input: user: no user named {name!r}.", {"user": [f"No user named {name!r}."]})
            # A token acts as its user: one for a staff or superuser account only from a superuser.
            services.require_may_manage(by=request.user, user=owner)
        if not owner.is_active:
            raise bad_request("invalid", "Invalid input: user: the user is deactivated.", {"user": ["The user is deactivated."]})
        token, key = token_create(user=owner, name=data["name"], by=request.user.get_username(), actor_type="user")
        body = TokenOutput(token).data
        return Response({**body, "key": key}, status=status.HTTP_201_CREATED)


class TokenRevokeApi(ApiView):
    """POST: revoke a token of yours (staff: anyone's). Another user's token is 404 to a
    non-staff caller. Revoking twice answers the token as it is (already revoked)."""

    @extend_schema(tags=TAG_TOKENS, operation_id="tokens_revoke", request=None, responses=TokenOutput)
    def post(self, request: Any, token_id: int) -> Response:
        tokens = ApiToken.objects.select_related("user")
        if not is_admin(request.user):
            tokens = tokens.filter(user=request.user)
        token = tokens.get(pk=token_id)
        token_revoke(token=token, by=request.user.get_username(), actor_type="user")
        return Response(TokenOutput(token).data)


# --------------------------------------------------------------------------- users and groups


class UserCollectionApi(ApiView):
    """GET: every user, ``?q=`` searches username, name and email (staff). POST: create one
    with a password, or invite them (staff)."""

    permission_classes = ApiView.permission_classes + [IsAdmin]

    @extend_schema(
        tags=TAG_USERS, operation_id="users_list", responses=paginated(UserOutput, "User"),
        parameters=[OpenApiParameter("q", str, description="Part of a username, name or email."), *PAGE_PARAMETERS],
    )
    def get(self, request: Any) -> Response:
        users = _users().order_by("username")
        q = self.validated(SearchQuery, request.query_params)["q"].strip()
        if q:
            users = users.filter(Q(username__icontains=q) | Q(first_name__icontains=q) | Q(last_name__icontains=q) | Q(email__icontains=q))
        return self.paginate(users, UserOutput)

    @extend_schema(tags=TAG_USERS, operation_id="users_create", request=UserCreateInput, responses={201: UserCreatedOutput, 409: CONFLICT})
    def post(self, request: Any) -> Response:
        data = self.validated(UserCreateInput, request.data)
        user = services.user_create(
            username=data["username"], email=data["email"], first_name=data["first_name"], last_name=data["last_name"],
            password=None if data["invite"] else data["password"], groups=data["groups"], by=request.user,
        )
        invite = _absolute(request, services.invite_path(user)) if data["invite"] else None
        return Response({**UserOutput(_users().get(pk=user.pk)).data, "invite_url": invite}, status=status.HTTP_201_CREATED)


class UserDetailApi(ApiView):
    """GET one user; PATCH: activate or deactivate, groups, email, names (staff)."""

    permission_classes = ApiView.permission_classes + [IsAdmin]

    @extend_schema(tags=TAG_USERS, operation_id="users_read", responses=UserOutput)
    def get(self, request: Any, user_id: int) -> Response:
        return Response(UserOutput(_users().get(pk=user_id)).data)

    @extend_schema(tags=TAG_USERS, operation_id="users_update", request=UserUpdateInput, responses=UserOutput)
    def patch(self, request: Any, user_id: int) -> Response:
        user = _user_or_404(user_id)
        data = self.validated(UserUpdateInput, request.data)
        services.user_update(user=user, by=request.user, **data)
        return Response(UserOutput(_users().get(pk=user_id)).data)


class UserInviteApi(ApiView):
    """POST: a fresh set-password link for the user (staff); the link is in this answer only."""

    permission_classes = ApiView.permission_classes + [IsAdmin]

    @extend_schema(tags=TAG_USERS, operation_id="users_invite", request=None, responses=InviteOutput)
    def post(self, request: Any, user_id: int) -> Response:
        path = services.user_invite(user=_user_or_404(user_id), by=request.user)
        return Response({"invite_url": _absolute(request, path)})


def _groups() -> Any:
    return Group.objects.prefetch_related(Prefetch("user_set", queryset=get_user_model().objects.order_by("username"))).order_by("name")


class GroupCollectionApi(ApiView):
    """GET: every group with its members; POST: create one (staff)."""

    permission_classes = ApiView.permission_classes + [IsAdmin]

    @extend_schema(tags=TAG_USERS, operation_id="groups_list", responses=GroupOutput(many=True))
    def get(self, request: Any) -> Response:
        return Response(GroupOutput(_groups(), many=True).data)

    @extend_schema(tags=TAG_USERS, operation_id="groups_create", request=GroupCreateInput, responses={201: GroupOutput, 409: CONFLICT})
    def post(self, request: Any) -> Response:
        data = self.validated(GroupCreateInput, request.data)
        group = services.group_create(name=data["name"], members=data["members"], by=request.user)
        return Response(GroupOutput(_groups().get(pk=group.pk)).data, status=status.HTTP_201_CREATED)


class GroupDetailApi(ApiView):
    """PATCH: set a group's members (staff)."""

    permission_classes = ApiView.permission_classes + [IsAdmin]

    @extend_schema(tags=TAG_USERS, operation_id="groups_update", request=GroupUpdateInput, responses=GroupOutput)
    def patch(self, request: Any, group_id: int) -> Response:
        group = Group.objects.get(pk=group_id)
        data = self.validated(GroupUpdateInput, request.data)
        services.group_set_members(group=group, members=data["members"], by=request.user)
        return Response(GroupOutput(_groups().get(pk=group_id)).data)


class PrincipalSearchApi(ApiView):
    """GET ``?q=``: active users and groups whose name contains ``q`` (users also by full
    name), at most 20 of each, for the pickers that name a graph's operators and an
    approval node's approvers (builders and staff)."""

    permission_classes = ApiView.permission_classes + [IsBuilderOrAdmin]

    @extend_schema(
        tags=TAG_USERS, operation_id="principals_search", responses=PrincipalsOutput,
        parameters=[OpenApiParameter("q", str, description="Part of a username, full name or group name (empty: the first ones)."),
                    OpenApiParameter("kind", str, enum=["user", "group"], description="Only users or only groups.")],
    )
    def get(self, request: Any) -> Response:
        query = self.validated(SearchQuery, request.query_params)
        q, kind = query["q"].strip(), query["kind"]
        results: list[dict[str, str]] = []
        if kind in ("", "user"):
            users = get_user_model().objects.filter(is_active=True)
            if q:
                users = users.filter(Q(username__icontains=q) | Q(first_name__icontains=q) | Q(last_name__icontains=q))
            for user in users.order_by("username")[:PRINCIPALS_LIMIT]:
                full = user.get_full_name()
                results.append({"kind": "user", "name": user.get_username(), "label": f"{full} ({user.get_username()})" if full else user.get_username()})
        if kind in ("", "group"):
            groups = Group.objects.all()
            if q:
                groups = groups.filter(name__icontains=q)
            for group in groups.order_by("name")[:PRINCIPALS_LIMIT]:
                results.append({"kind": "group", "name": group.name, "label": group.name})
        return Response({"results": results})
