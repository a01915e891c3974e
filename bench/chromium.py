"""Debian's Chromium as this machine kind must launch it, for the browser tests and the builder benchmark.

Playwright's own browser download cannot reach its host here, so both launch
/usr/bin/chromium (``apt-get install -y chromium``; override with BALLAST_CHROMIUM) through
``executable_path``, headless, with the flags below (see shared/TRAPS.md, Browser tests).
"""
from __future__ import annotations

import os
import shutil

CHROMIUM = os.environ.get("BALLAST_CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
