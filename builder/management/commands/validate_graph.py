"""`manage.py validate_graph FILE [--json] [--estimate]`: check a graph spec file (and estimate its worst-case cost); exit 0 when valid, else 1."""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from builder.spec import GraphSpec
from builder.topology import Topology
from builder.validation import validate_spec
from runs.nodes import get_kind


class Command(BaseCommand):
    help = (
        "Validate a graph spec (JSON file, or - for stdin). Prints 'valid' and exits 0, or one "
        "'node_id.field: message' line per error and exits 1. --json prints "
        '{"valid": bool, "errors": [...], "warnings": [...]}.'
    )
    # Validation is pure: no database, so skip the system checks (they may touch it).
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("file", help="path of the graph spec JSON file, or - for stdin")
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the result as JSON")
        parser.add_argument(
            "--estimate",
            action="store_true",
            help="also print each node's worst-case cost (tokens, USD) and the costliest path from start to an end",
        )

    def handle(self, *args: Any, file: str, as_json: bool, estimate: bool = False, **options: Any) -> None:
        data = self.load(file, as_json)
        result = validate_spec(data)
        report = estimate_spec(GraphSpec.model_validate(data)) if estimate and result.ok else None
        if as_json:
            out = result.as_dict()
            if report is not None:
                out["estimate"] = report
            self.stdout.write(json.dumps(out, indent=2))
        else:
            if result.ok:
                self.stdout.write("valid")
            for issue in result.issues:
                self.stdout.write(str(issue))
            # Warnings go to stderr so stdout stays exactly "valid" for a valid graph.
            for warning in result.warnings:
                self.stderr.write(f"warning: {warning}")
            if report is not None:
                self.write_estimate(report)
        if not result.ok:
            sys.exit(1)

    def write_estimate(self, report: dict[str, Any]) -> None:
        """The estimate as a table plus the costliest path."""
        self.stdout.write("")
        self.stdout.write("estimate (worst case of one execution: prompts from their templates, full max_tokens):")
        rows = [("node", "kind", "model", "tokens", "usd")] + [
            (n["node_id"], n["kind"], n["model"] or "", f"{n['tokens']:,}", _usd(n["usd"])) for n in report["nodes"]
        ]
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for row in rows:
            self.stdout.write("  " + "  ".join(c.rjust(w) if i >= 3 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip())
        path = report["costliest_path"]
        line = f"costliest path: {' -> '.join(path['nodes'])}: {path['tokens']:,} tokens, {_usd(path['usd'])}"
        if path["unpriced"]:
            line += f" plus unknown-price node(s) {', '.join(path['unpriced'])}"
        self.stdout.write(line)
        if path["loops"]:
            self.stdout.write(f"  (loops counted max_iterations + 1 times: {', '.join(path['loops'])})")

    def load(self, file: str, as_json: bool) -> Any:
        """The parsed JSON of ``file``; on failure exit 1 with one line (or a JSON error)."""
        try:
            text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self.fail(f"cannot read {file}: {reason}", "unreadable_file", as_json)
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            self.fail(
                f"{file} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", "invalid_json", as_json
            )

    def fail(self, message: str, code: str, as_json: bool) -> None:
        """Report an unusable input file and exit 1."""
        if as_json:
            error = {"node_id": None, "field": "file", "message": message, "code": code}
            self.stdout.write(json.dumps({"valid": False, "errors": [error], "warnings": []}, indent=2))
            sys.exit(1)
        # CommandError exits with returncode 1 and prints "CommandError: <message>" to stderr.
        raise CommandError(message, returncode=1)


def _usd(value: str | None) -> str:
    return "unknown" if value is None else f"${Decimal(value):.6f}"


def estimate_spec(spec: GraphSpec) -> dict[str, Any]:
    """Pre-run worst-case cost of a valid graph: each node's ``estimate_cost`` (an empty
    state, so prompts count as their template source) and the costliest path from the
    start to an end.

    Returns ``{"nodes": [{"node_id", "kind", "model", "tokens", "usd" (str|None)}],
    "costliest_path": {"nodes", "tokens", "usd", "unpriced", "loops"}}``. The path is
    chosen by USD (ties and unknown prices by tokens); a cycle (a bounded loop) counts
    each of its nodes ``max(max_iterations) + 1`` times, an upper bound.
    """
    topology = Topology(spec)
    nodes: list[dict[str, Any]] = []
    cost: dict[str, tuple[Decimal | None, int]] = {}
    for node in spec.nodes:
        kind = get_kind(node.kind)
        config = kind.config_model.model_validate(node.config)
        usd, tokens = kind.estimate_cost(config, {})
        cost[node.id] = (usd, tokens)
        nodes.append(
            {
                "node_id": node.id,
                "kind": node.kind,
                "model": node.config.get("model") if node.kind in ("llm", "agent") else None,
                "tokens": tokens,
                "usd": None if usd is None else str(usd),
            }
        )

    # Condense cycles (bounded loops) into one vertex each; the rest is a DAG.
    component = {node_id: node_id for node_id in topology.nodes}
    members: dict[str, list[str]] = {node_id: [node_id] for node_id in topology.nodes}
    repeat: dict[str, int] = {node_id: 1 for node_id in topology.nodes}
    for cycle in topology.cycles:
        head = cycle[0]
        bound = max((topology.nodes[n].max_iterations or 1) for n in cycle) + 1
        for n in cycle:
            component[n] = head
            members.pop(n, None)
        members[head], repeat[head] = list(cycle), bound

    def weight(comp: str) -> tuple[Decimal, int, list[str]]:
        usd, tokens, unpriced = Decimal(0), 0, []
        for n in members[comp]:
            n_usd, n_tokens = cost[n]
            tokens += n_tokens * repeat[comp]
            if n_usd is None:
                unpriced.append(n)
            else:
                usd += n_usd * repeat[comp]
        return usd, tokens, unpriced

    ends = {component[e] for e in topology.end_ids}

    @cache
    def best(comp: str) -> tuple[Decimal, int, tuple[str, ...], tuple[str, ...]] | None:
        usd, tokens, unpriced = weight(comp)
        successors = {component[t] for n in members[comp] for t in topology.successors(n)} - {comp}
        options = [b for b in (best(s) for s in sorted(successors)) if b is not None]
        if not options:
            return (usd, tokens, (comp,), tuple(unpriced)) if comp in ends else None
        tail = max(options, key=lambda b: (b[0], b[1]))
        return usd + tail[0], tokens + tail[1], (comp, *tail[2]), tuple(unpriced) + tail[3]

    start = component[topology.start_ids[0]]
    found = best(start) or (Decimal(0), 0, (start,), ())
    path_nodes = [n for comp in found[2] for n in members[comp]]
    loops = [f"{'+'.join(members[c])} x{repeat[c]}" for c in found[2] if repeat[c] > 1]
    return {
        "nodes": nodes,
        "costliest_path": {
            "nodes": path_nodes,
            "tokens": found[1],
            "usd": str(found[0]),
            "unpriced": list(found[3]),
            "loops": loops,
        },
    }
