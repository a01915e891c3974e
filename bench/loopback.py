"""A server process on the loopback for the benchmarks and the tests (as bench.chromium, tests import it): a free port to start it on, and whether it accepts connections yet."""
from __future__ import annotations

import random
import socket


def free_port() -> int:
    """A random TCP port of 20000-40000 on 127.0.0.1 that nothing was bound to a moment
    ago (a range of its own, away from the ephemeral ports clients get). Raises
    RuntimeError after 50 taken ones."""
    for _ in range(50):
        port = random.randint(20000, 40000)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-40000")


def accepts(port: int) -> bool:
    """Whether something on 127.0.0.1:``port`` accepts a TCP connection (within 0.2 s)."""
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0
