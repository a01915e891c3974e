"""Admin for graphs and their immutable versions."""
from django import forms
from django.contrib import admin

from builder.models import Graph, GraphVersion
from builder.validation import validate_spec


class GraphAdminForm(forms.ModelForm):
    """The graph form of the admin: a changed draft is validated like a publish
    (``builder.validation.validate_spec``) and each issue is shown on the draft field as
    ``path: message [code]``, so the admin cannot save a draft the builder would refuse."""

    class Meta:
        model = Graph
        fields = "__all__"

    def clean_draft(self):
        draft = self.cleaned_data.get("draft")
        # Only a changed draft: editing approvers must not be blocked by an old draft.
        if "draft" not in self.changed_data:
            return draft
        result = validate_spec(draft)
        if result.issues:
            raise forms.ValidationError(
                [
                    forms.ValidationError("%(where)s: %(message)s [%(code)s]", code=i.code,
                                          params={"where": i.path or "spec", "message": i.message, "code": i.code})
                    for i in result.issues
                ]
            )
        return draft


class GraphVersionInline(admin.TabularInline):
    model = GraphVersion
    fields = ("number", "is_test", "message", "content_hash", "created_by", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Graph)
class GraphAdmin(admin.ModelAdmin):
    form = GraphAdminForm
    list_display = ("name", "description", "version_count", "updated_at", "created_by")
    search_fields = ("name", "description")
    list_filter = ("created_at",)
    filter_horizontal = ("approvers", "operators", "operator_groups")
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
