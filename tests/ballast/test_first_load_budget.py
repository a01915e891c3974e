"""First-load script budgets of the browser app, read from Vite's manifest (frontend/dist/manifest.json).

A page's first load is the entry chunk plus every chunk its page module imports statically
(transitively), each gzipped at level 9, as the issue's targets count it: the approvals inbox
(also what an approval link opens, /approvals/<id>/) at most 100 KB, the run page at most
150 KB. Heavy editors (rjsf + ajv, CodeMirror) must arrive by dynamic import only. Needs the
build (`make frontend`, which `make test` runs first).
"""
from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path

import pytest

DIST = Path(__file__).resolve().parents[2] / "frontend" / "dist"
KB = 1024

# Page module (the manifest's key) -> budget in KB (gzip -9, entry included).
BUDGETS = {
    "src/pages/Approvals.tsx": 100,
    "src/pages/RunPage.tsx": 150,
}
# Source paths whose chunk must not be in a page's first load (they are lazy where used).
HEAVY = ("node_modules/@rjsf/", "node_modules/ajv", "node_modules/@codemirror/")


@cache
def manifest() -> dict[str, dict]:
    path = DIST / "manifest.json"
    if not path.exists():
        pytest.fail(f"{path} is missing: run make frontend first")
    return json.loads(path.read_text())


@cache
def gzipped(file: str) -> int:
    """Bytes of dist/``file`` gzipped at level 9."""
    return len(gzip.compress((DIST / file).read_bytes(), compresslevel=9))


def static_closure(key: str, into: set[str]) -> set[str]:
    """``key`` and every manifest key it imports statically, transitively (dynamic imports excluded)."""
    if key not in into:
        into.add(key)
        for dep in manifest()[key].get("imports", []):
            static_closure(dep, into)
    return into


def first_load(page: str) -> set[str]:
    """The manifest keys a first visit of ``page`` loads before the page can render."""
    entry = next(k for k, v in manifest().items() if v.get("isEntry"))
    return static_closure(page, static_closure(entry, set()))


@pytest.mark.parametrize("page", sorted(BUDGETS))
def test_first_load_scripts_stay_within_budget(page: str, capsys: pytest.CaptureFixture[str]) -> None:
    keys = first_load(page)
    total = sum(gzipped(manifest()[k]["file"]) for k in keys)
    with capsys.disabled():
        print(f"\n{page}: first-load scripts {total / KB:.1f} KB gzip -9 (budget {BUDGETS[page]} KB, {len(keys)} chunks)")
    assert total <= BUDGETS[page] * KB, sorted(((gzipped(manifest()[k]["file"]), k) for k in keys), reverse=True)


@pytest.mark.parametrize("page", sorted(BUDGETS))
def test_heavy_editors_are_not_in_a_first_load(page: str) -> None:
    m = manifest()
    heavy = set()
    for key in first_load(page):
        # A chunk's own source modules are not listed; read its map's sources instead.
        map_file = DIST / (m[key]["file"] + ".map")
        sources = json.loads(map_file.read_text()).get("sources", []) if map_file.exists() else []
        heavy |= {s for s in sources if any(h in s for h in HEAVY)}
    assert not heavy, sorted(heavy)[:10]
