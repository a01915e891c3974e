"""Tests of `manage.py validate_graph` and `export_schema`: exit codes and output.

Most run the command in this process (``call_command``, an exit code from ``SystemExit`` or
``CommandError`` as ``manage.py`` would turn it into one); one runs ``manage.py`` as a real
process (marker ``process``), so the way the exit code and the streams reach a shell stays
covered without paying an interpreter and a Django start per case.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.commands import call_manage
from tests.support.validation import _no_end, _unknown_var_transform, _unwired, baseline

ROOT = Path(__file__).resolve().parents[2]


def manage(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the command in this process: its exit code, stdout and stderr as a real run gives them."""
    return call_manage(*args, stdin=stdin)


def manage_process(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``manage.py`` as a real process."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=150,
    )


@pytest.fixture
def write(tmp_path: Path):
    def _write(data, name: str = "graph.json") -> str:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        return str(path)

    return _write


def invalid_graph() -> dict:
    data = baseline()
    _unknown_var_transform(data)
    _unwired(data)
    return data


def test_valid_graph_exits_0_and_prints_valid(write):
    proc = manage("validate_graph", write(baseline()))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "valid\n"


INVALID_GRAPH_LINES = [
    "calc.config.set.total: unknown variable 'y': declare 'y' in Graph settings → State keys, or use input.y",
    "check.handles.false: handle 'false' is not connected to any node",
]


def test_invalid_graph_exits_1_with_one_line_per_issue(write):
    proc = manage("validate_graph", write(invalid_graph()))
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == INVALID_GRAPH_LINES


@pytest.mark.process
@pytest.mark.timeout(180)
def test_a_real_process_exits_1_with_one_line_per_issue_and_0_for_valid(write):
    proc = manage_process("validate_graph", write(invalid_graph()))
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines() == INVALID_GRAPH_LINES
    proc = manage_process("validate_graph", "-", stdin=json.dumps(baseline()))
    assert (proc.returncode, proc.stdout) == (0, "valid\n"), proc.stderr


def test_graph_level_issue_has_no_node_prefix(write):
    data = baseline()
    _no_end(data)
    proc = manage("validate_graph", write(data))
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == ["nodes: the graph has no end node"]


def test_json_output(write):
    proc = manage("validate_graph", write(invalid_graph()), "--json")
    assert proc.returncode == 1
    payload = json.loads(proc.stdout)
    assert payload["valid"] is False
    assert [(e["node_id"], e["field"], e["code"]) for e in payload["errors"]] == [
        ("calc", "config.set.total", "unknown_variable"),
        ("check", "handles.false", "unwired_handle"),
    ]
    proc = manage("validate_graph", write(baseline(), "ok.json"), "--json")
    assert proc.returncode == 0
    assert json.loads(proc.stdout) == {"valid": True, "errors": [], "warnings": []}


def test_stdin(write):
    proc = manage("validate_graph", "-", stdin=json.dumps(baseline()))
    assert (proc.returncode, proc.stdout) == (0, "valid\n")


def test_missing_file_exits_1_with_one_line(tmp_path):
    missing = tmp_path / "nope.json"
    proc = manage("validate_graph", str(missing))
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot read {missing}" in lines[0]


def test_invalid_json_exits_1_with_one_line(write):
    path = write("{not json", "bad.json")
    proc = manage("validate_graph", path)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not valid JSON" in lines[0] and "line 1" in lines[0]
    proc = manage("validate_graph", path, "--json")
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["errors"][0]["code"] == "invalid_json"


def test_json_that_is_not_an_object(write):
    proc = manage("validate_graph", write([1, 2]))
    assert proc.returncode == 1
    assert proc.stdout.strip() == "spec: a graph spec must be a JSON object, not list"


def test_export_schema(tmp_path):
    proc = manage("export_schema")
    assert proc.returncode == 0, proc.stderr
    schemas = json.loads(proc.stdout)
    assert set(schemas) == {"graph", "nodes"}
    assert "transform" in schemas["nodes"]
    out = tmp_path / "schemas.json"
    proc = manage("export_schema", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text()) == schemas
