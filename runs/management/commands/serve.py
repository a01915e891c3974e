"""``manage.py serve``: run the web server (daphne) and a worker (qcluster) together.

Both run as children in this process group; Ctrl-C or SIGTERM stops both, and if one
dies the other is stopped too, so nothing is left running half-way.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Start web (daphne, HTTP + WebSockets) and worker (django-q2 qcluster) together."

    def add_arguments(self, parser):
        parser.add_argument("--bind", default=os.environ.get("BALLAST_BIND", "127.0.0.1:8000"))

    def handle(self, *args, **opts):
        manage = [sys.executable, "manage.py"]
        children = [
            subprocess.Popen([*manage, "runserver", opts["bind"], "--noreload"]),
            subprocess.Popen([*manage, "qcluster"], start_new_session=True),
        ]
        stopping = False

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        self.stdout.write(f"Ballast is up: http://{opts['bind']}/  (admin: http://{opts['bind']}/admin/) — Ctrl-C stops web and worker")
        self.stdout.flush()
        code = 0
        while not stopping:
            for child in children:
                if child.poll() is not None:
                    self.stderr.write(f"{child.args[2]} exited with {child.returncode}; stopping")
                    code = child.returncode or 1
                    stopping = True
            time.sleep(0.5)
        # SIGTERM to qcluster's main process only: sent to its whole process group,
        # django-q2 hangs in "stopping" (its sentinel dies holding the stop lock).
        for child in children:
            if child.poll() is None:
                child.terminate()
        for child in children:
            try:
                child.wait(timeout=20)
            except subprocess.TimeoutExpired:
                pass
            if child.args[2] == "qcluster":
                try:
                    os.killpg(child.pid, signal.SIGKILL)  # no orphaned workers, ever
                except ProcessLookupError:
                    pass
            elif child.poll() is None:
                child.kill()
        sys.exit(code)
