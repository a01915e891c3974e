"""Template tag that emits the script and style tags of a Vite entry from frontend/dist/manifest.json.

The manifest format is Vite's (https://vite.dev/guide/backend-integration): each entry
lists its ``file``, its ``css`` and the chunks it ``imports``; we emit the entry as a
module script, its CSS and ``modulepreload`` links for its static imports. Lazily
imported page chunks are fetched by the browser when needed.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from django import template
from django.conf import settings
from django.templatetags.static import static
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

register = template.Library()


class ViteManifestMissing(RuntimeError):
    """The front end has not been built: frontend/dist/manifest.json does not exist."""


def _manifest_path() -> Path:
    return Path(settings.BALLAST_FRONTEND_DIST) / "manifest.json"


@lru_cache(maxsize=4)
def _load(path: Path, mtime: float) -> dict[str, Any]:
    return json.loads(path.read_text())


def manifest() -> dict[str, Any]:
    """The parsed manifest, re-read when the file changes. Raises ViteManifestMissing."""
    path = _manifest_path()
    try:
        mtime = path.stat().st_mtime
    except FileNotFoundError:
        raise ViteManifestMissing(
            f"{path} is missing: build the front end (`make frontend`, or `npm ci && npm run build` in frontend/)"
        ) from None
    return _load(path, mtime)


def _imports(entries: dict[str, Any], name: str, seen: set[str]) -> list[str]:
    out: list[str] = []
    for dep in entries.get(name, {}).get("imports", []):
        if dep not in seen:
            seen.add(dep)
            out.append(dep)
            out.extend(_imports(entries, dep, seen))
    return out


@register.simple_tag
def vite_entry(name: str = "src/main.tsx") -> SafeString:
    """``<link rel=stylesheet>``, ``<link rel=modulepreload>`` and ``<script type=module>`` for entry ``name``."""
    entries = manifest()
    if name not in entries:
        raise ViteManifestMissing(f"entry {name!r} is not in {_manifest_path()}")
    chunk_names = [name, *_imports(entries, name, {name})]
    css = [c for n in chunk_names for c in entries[n].get("css", [])]
    styles = format_html_join("", '<link rel="stylesheet" href="{}">', ((static(c),) for c in css))
    preloads = format_html_join(
        "", '<link rel="modulepreload" href="{}">', ((static(entries[n]["file"]),) for n in chunk_names[1:])
    )
    script = format_html('<script type="module" src="{}"></script>', static(entries[name]["file"]))
    return format_html("{}{}{}", styles, preloads, script)
