"""Admin for graph versions (immutable); the graph's own page is builder.admin.GraphAdmin, whose form edits a draft."""
from django.contrib import admin
from django.http import HttpRequest

from graphs.models import GraphVersion

# Graph is registered by builder.admin: saving a draft there validates it and saves it
# through the builder's services (authoring), which this app may not import. Both models
# are listed under "Graphs" and served at /admin/graphs/ all the same (their app label).


class GraphVersionInline(admin.TabularInline):
    model = GraphVersion
    fields = ("number", "is_test", "message", "content_hash", "created_by", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(GraphVersion)
class GraphVersionAdmin(admin.ModelAdmin):
    list_display = ("graph", "number", "is_test", "message", "short_hash", "created_by", "created_at")
    list_filter = ("is_test", "graph")
    search_fields = ("graph__name", "content_hash", "message")
    readonly_fields = ("graph", "number", "is_test", "message", "spec", "content_hash", "created_by", "created_at")

    @admin.display(description="hash")
    def short_hash(self, obj: GraphVersion) -> str:
        return obj.content_hash[:12]

    def has_change_permission(self, request: HttpRequest, obj: GraphVersion | None = None) -> bool:
        return False  # versions are immutable
