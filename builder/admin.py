"""Admin for graphs and their immutable versions."""
from django.contrib import admin

from builder.models import Graph, GraphVersion


class GraphVersionInline(admin.TabularInline):
    model = GraphVersion
    fields = ("number", "is_test", "message", "content_hash", "created_by", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Graph)
class GraphAdmin(admin.ModelAdmin):
    list_display = ("name", "description", "version_count", "updated_at", "created_by")
    search_fields = ("name", "description")
    list_filter = ("created_at",)
    filter_horizontal = ("approvers",)
    inlines = [GraphVersionInline]

    @admin.display(description="versions")
    def version_count(self, obj: Graph) -> int:
        return obj.versions.count()


@admin.register(GraphVersion)
class GraphVersionAdmin(admin.ModelAdmin):
    list_display = ("graph", "number", "is_test", "message", "short_hash", "created_by", "created_at")
    list_filter = ("is_test", "graph")
    search_fields = ("graph__name", "content_hash", "message")
    readonly_fields = ("graph", "number", "is_test", "message", "spec", "content_hash", "created_by", "created_at")

    @admin.display(description="hash")
    def short_hash(self, obj: GraphVersion) -> str:
        return obj.content_hash[:12]

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # versions are immutable
