"""Admin for graphs: the draft form, validated and saved like the builder saves it (versions: graphs.admin)."""
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpRequest

from builder import services
from builder.validation import validate_spec
from graphs.admin import GraphVersionInline
from graphs.models import Graph

# Written by builder.services.graph_draft_save only (the revision is the builder's
# conflict check), so the admin shows them without letting anyone type them.
DRAFT_BOOKKEEPING = ("draft_revision", "draft_updated_by", "draft_updated_at")


class GraphAdminForm(forms.ModelForm):
    """The graph form of the admin: a changed draft is validated like a publish
    (``builder.validation.validate_spec``) and each issue is shown on the draft field as
    ``path: message [code]``, so the admin cannot save a draft the builder would refuse."""

    # The revision the page was rendered at: a draft saved since (in a builder tab) is
    # not overwritten; the admin is told to reload instead, as a builder tab would be.
    base_revision = forms.IntegerField(widget=forms.HiddenInput, required=False)

    class Meta:
        model = Graph
        exclude = DRAFT_BOOKKEEPING

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:
            self.fields["base_revision"].initial = self.instance.draft_revision

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if cleaned is None or self.instance.pk is None or "draft" not in self.changed_data:
            return cleaned
        base = cleaned.get("base_revision")
        stored = Graph.objects.filter(pk=self.instance.pk).values_list("draft_revision", flat=True).first()
        if base is None or base != stored:
            self.add_error(
                "draft",
                forms.ValidationError(
                    "The draft was saved elsewhere (revision %(stored)s) since this page was opened "
                    "(revision %(base)s); reload the page to edit the current draft.",
                    code="conflict",
                    params={"stored": stored, "base": base if base is not None else "unknown"},
                ),
            )
        return cleaned

    def clean_draft(self) -> Any:
        draft = self.cleaned_data["draft"]  # there: clean_<field> runs once the field cleaned
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


@admin.register(Graph)
class GraphAdmin(admin.ModelAdmin):
    form = GraphAdminForm
    list_display = ("name", "description", "version_count", "updated_at", "created_by")
    search_fields = ("name", "description")
    list_filter = ("created_at",)
    filter_horizontal = ("approvers", "operators", "operator_groups")
    inlines = [GraphVersionInline]
    readonly_fields = DRAFT_BOOKKEEPING

    def save_model(self, request: HttpRequest, obj: Graph, form: Any, change: bool) -> None:
        """A changed draft of an existing graph is saved through
        ``builder.services.graph_draft_save`` (compare-and-set on the revision the page
        was rendered at, revision bumped), so a builder tab holding the old draft gets a
        conflict instead of silently overwriting the admin's edit. Other changed fields
        are saved in the same transaction."""
        if not change or "draft" not in form.changed_data:
            super().save_model(request, obj, form, change)
            return
        spec = obj.draft
        # Plain columns only: many-to-many fields (approvers, operators) are saved by save_related.
        columns = {f.name for f in Graph._meta.concrete_fields}
        others = [f for f in form.changed_data if f in columns and f != "draft"]
        try:
            with transaction.atomic():
                if others:
                    obj.save(update_fields=[*others, "updated_at"])
                services.graph_draft_save(graph=obj, spec=spec, base_revision=form.cleaned_data["base_revision"], user=request.user)
        except services.DraftConflict as exc:
            # Another save came between the form's check and this one: nothing was written.
            obj.refresh_from_db()
            self.message_user(request, str(exc), messages.ERROR)

    @admin.display(description="versions")
    def version_count(self, obj: Graph) -> int:
        return obj.versions.count()
