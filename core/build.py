"""The build of the code this process runs: recorded on every step attempt and on every structured log line.

A deploy can leave one run's steps executed by two builds (a worker host updated while
another still runs the old code); each attempt row keeps the build that ran it so the mix
is visible. The build is, in order:

1. ``BALLAST_BUILD`` when set (a release name, an image tag, a CI build id), as given;
2. else ``<package version>+<short git revision>`` when the code runs from a git checkout
   (``0.1.0+3f9c2a1b7e04``), with ``.dirty`` appended when tracked files differ from it;
3. else the package version alone (an installed wheel, an image without ``.git``).

It is computed once per process (the first call runs ``git`` at most twice, about 5 ms)
and cached: the engine's commit reads it for every attempt it opens.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

# runs_stepattempt.build's width: a longer BALLAST_BUILD is cut to fit.
MAX_LENGTH = 100
_ROOT = Path(__file__).resolve().parent.parent
_GIT_TIMEOUT_SECONDS = 5


def package_version() -> str:
    """The installed ``ballast`` distribution's version (``0.1.0``), or ``unknown`` when the
    package metadata is absent (code run from a copy of the tree that was never installed)."""
    try:
        return metadata.version("ballast")
    except metadata.PackageNotFoundError:
        return "unknown"


def git_revision(root: Path) -> str:
    """The short revision (12 hex digits) checked out at ``root``, with ``.dirty`` when
    tracked files were changed, or "" when ``root`` is not a git checkout (no ``.git``
    entry: an installed wheel, a container image) or git is missing or fails."""
    git = shutil.which("git")
    if git is None or not (root / ".git").exists():
        return ""
    try:
        rev = subprocess.run(
            [git, "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True, text=True, timeout=_GIT_TIMEOUT_SECONDS, check=True,
        ).stdout.strip()
        # Exit status 1 when the work tree differs from HEAD in tracked files (untracked
        # files do not count: var/ and node_modules/ live in the tree).
        dirty = subprocess.run(
            [git, "-C", str(root), "diff-index", "--quiet", "HEAD", "--"],
            capture_output=True, timeout=_GIT_TIMEOUT_SECONDS, check=False,
        ).returncode == 1
    except (OSError, subprocess.SubprocessError):
        return ""
    return f"{rev}.dirty" if rev and dirty else rev


@functools.cache
def build() -> str:
    """This process's build string, at most :data:`MAX_LENGTH` characters: ``BALLAST_BUILD``
    when set and not blank, else ``<version>+<revision>`` or the version alone (module
    docstring). Cached for the life of the process; tests that change ``BALLAST_BUILD``
    call ``build.cache_clear()``."""
    given = os.environ.get("BALLAST_BUILD", "").strip()
    if given:
        return given[:MAX_LENGTH]
    version, rev = package_version(), git_revision(_ROOT)
    return (f"{version}+{rev}" if rev else version)[:MAX_LENGTH]
