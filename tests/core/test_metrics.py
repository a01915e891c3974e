"""core.metrics: bounded labels, and a host's multiprocess exposition adding up real processes (counters kept, dead processes' live gauges dropped, a start cleaning what dead processes left)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from core import metrics
from tests.support.metrics import sample_value

REPO = Path(__file__).resolve().parents[2]

# A process that records into the host's directory as a worker would, then says so and
# either exits (a recycled worker) or stays until its stdin closes.
WRITER = """
import sys
from core import metrics
metrics.STEPS_COMMITTED.labels(kind="tool").inc(int(sys.argv[1]))
metrics.WEBSOCKETS_OPEN.labels(stream="runs").inc(int(sys.argv[1]))
metrics.WORKER_SLOTS_IN_USE.inc()
print("written", flush=True)
if sys.argv[2] == "stay":
    sys.stdin.read()
"""


def test_bounded_keeps_known_values_and_folds_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "_seen", {})
    monkeypatch.setattr(metrics, "MAX_LABEL_VALUES", 3)
    assert [metrics.bounded("code", c) for c in ("timeout", "http_error", "timeout", "expression")] == [
        "timeout", "http_error", "timeout", "expression",
    ]
    assert metrics.bounded("code", "rate_limited") == "other"  # a fourth distinct value
    assert metrics.bounded("code", "timeout") == "timeout"  # the known ones stay
    assert metrics.bounded("model", "rate_limited") == "rate_limited"  # per label
    assert metrics.bounded("model", "") == "none"
    assert metrics.bounded("graph", "a graph\nwith a newline") == "other"
    assert metrics.bounded("graph", "x" * 81) == "other"


def _writer(directory: Path, amount: int, mode: str) -> subprocess.Popen:
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(amount), mode], cwd=REPO, env=env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "written"
    return proc


@pytest.mark.process
def test_one_scrape_adds_up_every_process_of_the_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gone = _writer(tmp_path, 2, "exit")
    assert gone.wait(timeout=60) == 0
    staying = _writer(tmp_path, 3, "stay")
    try:
        monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
        families = list(text_string_to_metric_families(metrics.exposition().decode()))
        # A counter keeps what a process that ended had counted; a live gauge counts live processes only.
        assert sample_value(families, "ballast_steps_committed_total", kind="tool") == 5
        assert sample_value(families, "ballast_websockets_open", stream="runs") == 3
        assert sample_value(families, "ballast_worker_slots_in_use") == 1
        # A host's next start drops the files of processes that are gone, not a live one's.
        assert metrics.clean_dead_processes(str(tmp_path)) >= 1
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            f"{kind}_{staying.pid}.db" for kind in ("counter", "gauge_livesum")
        )
        families = list(text_string_to_metric_families(metrics.exposition().decode()))
        assert sample_value(families, "ballast_steps_committed_total", kind="tool") == 3
    finally:
        staying.communicate(timeout=60)
