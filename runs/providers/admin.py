"""Admin for providers added in the app: a write-only API key field, saves through the audited services, and a "Test connection" button.

Imported by ``ballast.urls`` before the admin URLs are built.
The key is a password input that never renders a value; once saved, the page only says
whether a key is stored.
"""
from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse

from runs.models import ProviderCredential
from runs.providers import credentials as store
from runs.providers import services


class ProviderCredentialForm(forms.ModelForm):
    """Name, kind, URL, models; ``api_key`` is write-only (empty on a change keeps the
    stored key; "Remove the stored key" deletes it). Checked by the same rules as the API
    (``services.credential_clean``)."""

    api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        max_length=store.MAX_KEY_CHARS,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Stored encrypted; never shown again after saving.",
    )
    remove_key = forms.BooleanField(label="Remove the stored key", required=False)
    models_text = forms.CharField(
        label="Models",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="One model name per line, offered by node forms and checked by validation (must include the default model). Empty: any model.",
    )

    class Meta:
        model = ProviderCredential
        fields = ["name", "kind", "label", "base_url", "default_model"]
        help_texts = {
            "name": "What nodes write as their provider. Cannot be changed later.",
            "base_url": "API root. Required for an OpenAI-compatible server (e.g. http://127.0.0.1:11434/v1); "
            "optional for OpenAI and Anthropic (a proxy).",
        }

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        editing = self.instance is not None and self.instance.pk is not None
        if editing:
            self.fields["name"].disabled = True
            self.fields["models_text"].initial = "\n".join(self.instance.model_names)
            if self.instance.has_key:
                self.fields["api_key"].help_text = "A key is stored (not shown). Leave empty to keep it; type a new one to replace it."
            else:
                self.fields["api_key"].help_text = "No key is stored. " + self.fields["api_key"].help_text
        else:
            del self.fields["remove_key"]

    def credential_data(self) -> dict[str, Any]:
        """The form's fields as the services take them."""
        data = self.cleaned_data
        out = {
            "name": data.get("name"),
            "kind": data.get("kind"),
            "label": data.get("label") or "",
            "base_url": data.get("base_url") or "",
            "default_model": data.get("default_model") or "",
            "model_names": [line.strip() for line in (data.get("models_text") or "").splitlines() if line.strip()],
        }
        if data.get("remove_key"):
            out["api_key"] = ""
        elif data.get("api_key"):
            out["api_key"] = data["api_key"]
        return out

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if self.errors:
            return cleaned
        existing = self.instance if self.instance.pk is not None else None
        try:
            services.credential_clean(self.credential_data(), existing=existing)
        except store.CredentialInvalid as exc:
            targets = {"model_names": "models_text"}
            for name, problems in exc.fields.items():
                field = targets.get(name, name)
                for problem in problems:
                    self.add_error(field if field in self.fields else None, problem)
        return cleaned


@admin.register(ProviderCredential)
class ProviderCredentialAdmin(admin.ModelAdmin):
    """Staff add OpenAI, Anthropic and OpenAI-compatible providers; every save goes
    through the audited services; "Test connection" asks the provider for one token."""

    form = ProviderCredentialForm
    list_display = ("name", "kind", "label", "base_url", "default_model", "key_stored", "updated_at", "updated_by")
    list_filter = ("kind",)
    search_fields = ("name", "label", "base_url", "default_model")
    readonly_fields = ("key_stored", "created_at", "created_by", "updated_at", "updated_by")
    actions = ["test_selected"]
    fieldsets = (
        (None, {"fields": ("name", "kind", "label", "base_url", "default_model", "models_text")}),
        ("API key", {"fields": ("api_key", "remove_key", "key_stored")}),
        ("History", {"fields": ("created_at", "created_by", "updated_at", "updated_by")}),
    )

    def get_fieldsets(self, request: Any, obj: ProviderCredential | None = None) -> Any:
        if obj is None:
            return ((None, {"fields": ("name", "kind", "label", "base_url", "default_model", "models_text")}), ("API key", {"fields": ("api_key",)}))
        return self.fieldsets

    @admin.display(boolean=True, description="key stored")
    def key_stored(self, obj: ProviderCredential) -> bool:
        return obj.has_key

    def save_model(self, request: Any, obj: ProviderCredential, form: ProviderCredentialForm, change: bool) -> None:
        data = form.credential_data()
        if change:
            saved = services.provider_credential_update(credential=obj, data=data, user=request.user)
        else:
            saved = services.provider_credential_create(data=data, user=request.user)
        for f in ProviderCredential._meta.concrete_fields:
            setattr(obj, f.attname, getattr(saved, f.attname))
        obj._state.adding = False

    def delete_model(self, request: Any, obj: ProviderCredential) -> None:
        services.provider_credential_delete(credential=obj, user=request.user)

    def delete_queryset(self, request: Any, queryset: Any) -> None:
        for credential in queryset:
            services.provider_credential_delete(credential=credential, user=request.user)

    # ----------------------------------------------------------------- test connection
    def get_urls(self) -> list[Any]:
        custom = [
            path("<int:object_id>/test/", self.admin_site.admin_view(self.test_view), name="runs_providercredential_test"),
        ]
        return custom + super().get_urls()

    def test_view(self, request: Any, object_id: int) -> Any:
        """POST: test the stored provider, show the outcome as a message, go back to its page."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        credential = get_object_or_404(ProviderCredential, pk=object_id)
        if not self.has_change_permission(request, credential):
            return HttpResponseRedirect(reverse("admin:index"))
        self._report(request, credential)
        return HttpResponseRedirect(reverse("admin:runs_providercredential_change", args=[credential.pk]))

    @admin.action(description="Test connection of the selected providers")
    def test_selected(self, request: Any, queryset: Any) -> None:
        for credential in queryset:
            self._report(request, credential)

    def _report(self, request: Any, credential: ProviderCredential) -> None:
        result = store.stored_connection_test(credential)
        if result.ok:
            messages.success(request, f"{credential.name}: connection works ({result.message}).")
        else:
            code = (result.error or {}).get("code", "error")
            messages.error(request, f"{credential.name}: connection failed ({code}): {result.message}")
