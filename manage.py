#!/usr/bin/env python
"""Django's command-line entry point for Ballast."""
import atexit
import gc
import os
import sys


def main() -> None:
    # Registered first, so it runs last: once every atexit handler has run, move the
    # long-lived heap into the GC's permanent generation. The interpreter's teardown then
    # frees it by reference counting alone instead of running its full collections over
    # it, about 1.5 s of CPU for a web or worker process here, and ten times that in wall
    # time on a loaded 2-core machine, which is what made `serve` overrun its stop
    # allowances (runs/management/commands/serve.py). Nothing is lost: CPython does not
    # promise to collect cycles at exit, and files, sockets and database connections are
    # closed by the commands themselves, their atexit handlers or the kernel.
    atexit.register(gc.freeze)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ballast.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
