"""Field paths: the one way every Ballast error names the field at fault (``input.items[0].sku``)."""
from __future__ import annotations

from collections.abc import Iterable


def field_path(loc: Iterable[str | int], prefix: str = "") -> str:
    """The one style of a field's path in every error Ballast reports (validation issues,
    API field errors, run input, tool arguments, provider options): keys joined by dots,
    list positions in brackets. ``("cases", 0, "expression")`` -> ``cases[0].expression``;
    with ``prefix="config"``: ``config.cases[0].expression``; ``()`` -> ``prefix``.
    Pydantic, jsonschema and DRF locations are such sequences (ints are positions)."""
    out = prefix
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out
