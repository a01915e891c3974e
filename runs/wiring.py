"""What the runs app connects once every app is loaded (RunsConfig.ready): the audit chain's run lock, the run alerts, the tool modules' system check, traces, the retention job as a due source, and the recovery supervisor inside ``manage.py qcluster``."""
from __future__ import annotations

import sys

from django.core import checks

from audit.chain import register_scope_lock
from core import tracing
from runs import retention_job
from runs.engine.api import is_cluster_main_process, register_flow_gates, run_lock_for_audit, start_supervisor
from runs.reports import alerts  # noqa: F401  (connects the run alert receivers: runs fail and park in workers too)
from runs.subgraphs import calls as subgraph_calls
from runs.subgraphs import tools as graph_tools
from runs.tools.checks import TOOL_MODULES_TAG, tool_modules_importable


def connect() -> None:
    """Register and start what the runs app needs in this process (once, from ready())."""
    # Appends to a run's chain (run:<id>) lock the run row before the chain's head: the
    # order every engine commit of the run takes its locks in (no deadlock between them).
    register_scope_lock("run", run_lock_for_audit)
    # A tool module that fails to import stops manage.py commands at start, naming it.
    checks.register(tool_modules_importable, TOOL_MODULES_TAG)
    # Traces, when the OTEL_* variables name an exporter (off otherwise): before a
    # qcluster forks its workers, which inherit the provider.
    tracing.configure()
    # Every process that claims steps fires the retention job when it is due (a due
    # source of the engine, as triggers registers schedules).
    retention_job.register_with_engine()
    # Flow control across runs: a run's end makes its graph's gate due; the claim admits.
    register_flow_gates()
    # Graphs that call graphs: a child's end owes its parent step its result (a due source)
    # and a parent's end cancels its active children (runs.subgraphs.calls).
    subgraph_calls.register()
    # An agent's graph tools: each call a child run as a subgraph step's (runs.subgraphs.tools).
    graph_tools.register()
    if is_cluster_main_process(sys.argv):
        start_supervisor()
