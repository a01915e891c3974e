"""Account API routes (mounted at /api/v1/): tokens, users, groups, the principal search."""
from django.urls import path

from accounts import apis

urlpatterns = [
    path("tokens/", apis.TokenCollectionApi.as_view(), name="tokens"),
    path("tokens/<int:token_id>/revoke/", apis.TokenRevokeApi.as_view(), name="token-revoke"),
    path("users/", apis.UserCollectionApi.as_view(), name="users"),
    path("users/<int:user_id>/", apis.UserDetailApi.as_view(), name="user"),
    path("users/<int:user_id>/invite/", apis.UserInviteApi.as_view(), name="user-invite"),
    path("groups/", apis.GroupCollectionApi.as_view(), name="groups"),
    path("groups/<int:group_id>/", apis.GroupDetailApi.as_view(), name="group"),
    path("principals/", apis.PrincipalSearchApi.as_view(), name="principals"),
]
