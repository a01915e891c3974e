"""The pure parts behind the builder API: node handles, issue paths, the expression and
template checker, the tolerant cost estimate, sticky notes and the layout-aware diff."""
from __future__ import annotations

from decimal import Decimal

from builder.graph_checks import node_handles
from builder.selectors import spec_diff
from builder.validation import check_source, validate_spec
from graphs.spec import GraphSpec
from runs.reports.estimate import estimate_spec
from tests.support.specs import chain, edge, graph, node, transform


def test_handles_follow_the_config_and_fall_back_for_a_broken_one() -> None:
    cases = {"cases": [{"handle": "a", "expression": "x"}, {"handle": "b", "expression": "y"}]}
    assert node_handles("condition", cases)["outputs"] == ["a", "b", "default"]
    assert node_handles("condition", {"expression": "x"})["outputs"] == ["true", "false"]
    assert node_handles("condition", {"cases": "broken"})["outputs"] == ["true", "false"]  # the kind's default handles
    assert node_handles("approval", {})["outputs"] == ["approved", "rejected"] and node_handles("approval", {})["optional"] == ["rejected"]
    assert node_handles("start", {}) == {"inputs": [], "outputs": [], "default_output": True, "optional": []}
    assert node_handles("end", {})["default_output"] is False
    assert node_handles("warp", {}) == {"inputs": ["in"], "outputs": [], "default_output": True, "optional": []}
    assert node_handles(None, None)["inputs"] == ["in"]


def test_every_issue_has_a_path_from_the_spec_root() -> None:
    spec = graph(
        [node("start", "start"), transform("t", y="x +"), node("c", "condition", config={"expression": "y", "extra": 1}), node("end", "end")],
        [*chain("start", "t", "c"), edge("c", "end", "true"), edge("c", "nowhere", "false")],
    )
    by_code = {i.code: i for i in validate_spec(spec).issues}
    assert (by_code["invalid_expression"].path, by_code["invalid_expression"].field) == ("nodes[1].config.set.y", "config.set.y")
    assert by_code["invalid_config"].path == "nodes[2].config.extra"
    assert (by_code["dangling_edge"].node_id, by_code["dangling_edge"].path) == (None, "edges[3].target")
    assert by_code["invalid_config"].as_dict()["node"] == "c"
    unparsed = validate_spec({"name": "x", "nodes": [{"id": "a", "kind": "start", "retry": {"max_attempts": 0}}]})
    # The parse issue, and (validation goes on past it) the graph's missing end node.
    assert [i.path for i in unparsed.issues] == ["nodes", "nodes[0].retry.max_attempts"]
    assert validate_spec([]).issues[0].path == ""


def test_check_source_points_at_line_and_column() -> None:
    assert check_source("expression", "(a and\n  b)", ["a", "b"])["ok"] is True
    multi = check_source("expression", "(a +\n  nope)", ["a"])
    assert multi["errors"] == [{"message": "unknown variable 'nope': declare 'nope' in Graph settings → State keys, or use input.nope", "line": 2, "column": 3, "code": "unknown_variable"}]
    assert check_source("expression", "\n\n  x +", ["x"])["errors"][0]["line"] == 3
    assert check_source("expression", "", [])["errors"][0]["code"] == "syntax"
    assert check_source("expression", "x.y + y", ["x"])["errors"][0]["column"] == 7  # the attribute y is not the name y
    assert check_source("template", "{{ a }}{% for i in items %}{{ i }}{% endfor %}", ["a", "items"])["ok"] is True
    assert check_source("template", "{% macro m() %}{% endmacro %}")["errors"][0]["code"] == "forbidden"


def test_estimate_tolerates_a_draft_and_counts_loops() -> None:
    llm = node("ask", "llm", config={"provider": "mock", "model": "mock-1", "prompt": "hi", "max_tokens": 10}, max_iterations=2)
    spec = GraphSpec.model_validate(
        graph(
            [node("start", "start"), llm, node("check", "condition", config={"expression": "1"}), node("bad", "llm", config={"nope": 1}), node("end", "end")],
            [*chain("start", "ask", "check"), edge("check", "ask", "true"), edge("check", "end", "false"), edge("start", "bad"), edge("bad", "end")],
        )
    )
    report = estimate_spec(spec)
    by_id = {n["node_id"]: n for n in report["nodes"]}
    assert by_id["bad"]["usd"] is None and by_id["bad"]["tokens"] == 0
    path = report["costliest_path"]
    assert path["nodes"][:3] == ["start", "ask", "check"] and path["loops"] == ["ask+check x3"]
    assert Decimal(path["usd"]) == 3 * Decimal(by_id["ask"]["usd"]) and path["tokens"] == 3 * by_id["ask"]["tokens"]
    no_start = estimate_spec(GraphSpec.model_validate(graph([node("end", "end")], [])))
    assert no_start["costliest_path"]["nodes"] == []


def test_costliest_path_lists_a_loop_in_the_order_a_run_walks_it() -> None:
    # Loop members come sorted from Topology.cycles; the path must read as the run goes.
    spec = GraphSpec.model_validate(
        graph(
            [node("start", "start"), {**transform("lookup", n="1"), "max_iterations": 3}, transform("count", m="1"),
             node("found", "condition", config={"expression": "m > 1"}), node("end", "end")],
            [*chain("start", "lookup", "count", "found"), edge("found", "lookup", "false"), edge("found", "end", "true")],
        )
    )
    path = estimate_spec(spec)["costliest_path"]
    assert path["nodes"] == ["start", "lookup", "count", "found", "end"]
    assert path["loops"] == ["lookup+count+found x4"]


def test_estimate_of_a_long_chain_does_not_overflow_the_stack() -> None:
    # 400 nodes: a recursive walk (4 frames a node) passes Python's 1,000-frame limit.
    ids = ["start", *[f"s{i}" for i in range(398)], "end"]
    nodes = [node("start", "start"), *[transform(i, **{f"v_{i}": "1"}) for i in ids[1:-1]], node("end", "end")]
    spec = GraphSpec.model_validate(graph(nodes, chain(*ids)))
    path = estimate_spec(spec)["costliest_path"]
    assert path["nodes"] == ids and path["tokens"] == 0


def test_notes_parse_and_change_nothing_else() -> None:
    base = graph([node("start", "start"), node("end", "end")], chain("start", "end"))
    noted = {**base, "notes": [{"id": "n1", "text": "hello", "color": "#aabbcc"}]}
    parsed = GraphSpec.model_validate(noted)
    assert parsed.notes[0].width == 200 and parsed.notes[0].position.x == 0
    assert validate_spec(noted).ok and validate_spec(noted).as_dict() == validate_spec(base).as_dict()
    assert not validate_spec({**base, "notes": [{"id": "n1", "colour": "red"}]}).ok


def test_diff_keeps_layout_apart_from_logic() -> None:
    old = graph([node("a", "start", position={"x": 0, "y": 0}), node("b", "end")], chain("a", "b"), name="g")
    new = graph([node("a", "start", position={"x": 5, "y": 0}, label="Begin"), node("b", "end")], chain("a", "b"), name="g")
    new["notes"] = [{"id": "n"}]
    diff = spec_diff(old, new)
    assert diff["layout"] == {"positions": ["a"], "notes": {"added": ["n"], "removed": [], "changed": []}}
    assert diff["nodes"]["changed"] == [{"id": "a", "fields": {"label": {"from": None, "to": "Begin"}}}]
    assert diff["logic_identical"] is False
    only_moved = spec_diff(old, {**old, "nodes": [node("a", "start", position={"x": 9, "y": 9}), node("b", "end")]})
    assert only_moved["logic_identical"] is True and only_moved["nodes"]["changed"] == []
