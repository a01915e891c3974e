"""Named crash points for tests; no-ops unless BALLAST_FAULT names the point.

``BALLAST_FAULT=point[:node_id]`` arms one point (optionally only for one node);
``BALLAST_FAULT_FILE`` is where the hit is reported (JSON: point, node, step, pid).
On a hit the process reports it and then hangs, so the test can SIGKILL the whole
process group from outside at exactly that point (DBOS keeps named fault points the same
way). Points: ``during_execute`` (lease held, node about to run; a step not safe to repeat has
its attempt marked begun, claims.mark_effect_begun), ``before_commit``
(node ran, nothing committed), ``after_commit`` (committed, successors not handed to
the queue), ``deadline_before_commit`` (a waiting step's deadline fired: its
writes made, not committed; runs.engine.store.deadlines).
"""
from __future__ import annotations

import json
import os
import time

_ARMED = os.environ.get("BALLAST_FAULT", "")


def point(name: str, *, node_id: str = "", step_id: int | None = None) -> None:
    """Hang here (after reporting) if this point is armed for this node; else return at once."""
    if not _ARMED:
        return
    wanted, _, wanted_node = _ARMED.partition(":")
    if wanted != name or (wanted_node and wanted_node != node_id):
        return
    path = os.environ.get("BALLAST_FAULT_FILE")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"point": name, "node_id": node_id, "step_id": step_id, "pid": os.getpid()}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    while True:  # wait for SIGKILL
        time.sleep(3600)
