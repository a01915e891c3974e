"""Management commands run in the test's own process, with the exit code and streams a shell would see."""
from __future__ import annotations

import io
import subprocess
import sys

from django.core.management import call_command
from django.core.management.base import CommandError


def call_manage(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``manage.py ARGS`` in this process (``call_command``) and return what a real
    process would give: ``returncode`` from ``SystemExit`` or a ``CommandError`` (as
    ``BaseCommand.run_from_argv`` turns it into one), the command's stdout and stderr as
    text. ``stdin``: text the command reads from ``sys.stdin``. Raises whatever else the
    command raises (a bug, not an exit code)."""
    out, err = io.StringIO(), io.StringIO()
    returncode = 0
    saved_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        call_command(*args, stdout=out, stderr=err)
    except SystemExit as exc:
        returncode = exc.code if isinstance(exc.code, int) else 1
    except CommandError as exc:
        returncode = exc.returncode
        err.write(f"CommandError: {exc}\n")
    finally:
        sys.stdin = saved_stdin
    return subprocess.CompletedProcess(list(args), returncode, out.getvalue(), err.getvalue())
