"""Tests of builder.validation: one case per defect kind (exact node, field, code), and valid graphs."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from builder.issues import ValidationResult
from builder.validation import export_schemas, validate_spec
from graphs.spec import GraphSpec
from runs.nodes.base import Issue
from tests.support.validation import _no_end, _unknown_var_transform, _unwired, baseline, edge, graph, node, transform

# --- builders -----------------------------------------------------------------------------












def fan_out(*branches: dict[str, Any], state: dict | None = None, join: bool = True) -> dict[str, Any]:
    """start fans out to each branch node; each branch goes to a join (or straight to end)."""
    ids = [b["id"] for b in branches]
    nodes = [node("start", "start"), *branches, node("done", "end")]
    edges = [edge("start", i) for i in ids]
    if join:
        nodes.insert(-1, node("j", "join"))
        edges += [edge(i, "j") for i in ids] + [edge("j", "done")]
    else:
        edges += [edge(i, "done") for i in ids]
    return graph(nodes, edges, state=state or {})


def keyed(result: ValidationResult) -> list[tuple[str | None, str, str]]:
    return [(i.node_id, i.field, i.code) for i in result.issues]


def test_baseline_is_valid():
    result = validate_spec(baseline())
    assert result.issues == []
    assert result.ok
    assert isinstance(result.spec, GraphSpec)
    assert set(result.configs) == {"start", "calc", "check", "big", "done"}


def test_accepts_a_parsed_spec():
    assert validate_spec(GraphSpec.model_validate(baseline())).ok


# --- defects --------------------------------------------------------------------------------
# Each case: mutate the baseline; expect exactly these (node_id, field, code) issues, and the
# message of the first to contain a fragment.


def _dup_node(g):
    g["nodes"].append(node("calc", "join"))


def _no_start(g):
    g["nodes"] = [n for n in g["nodes"] if n["id"] != "start"]
    g["edges"] = g["edges"][1:]


def _two_starts(g):
    g["nodes"].append(node("start2", "start"))
    g["edges"].append(edge("start2", "calc"))




def _unknown_kind(g):
    g["nodes"][3]["kind"] = "frobnicate"


def _config_extra(g):
    g["nodes"][1]["config"]["sett"] = {"a": "1"}


def _config_condition_mode(g):
    g["nodes"][2]["config"] = {}


def _config_bad_key(g):
    g["nodes"][1]["config"]["set"] = {"2x": "x"}


def _spec_bad_field(g):
    g["nodes"][1]["max_iterations"] = 0


def _spec_edge_missing_target(g):
    del g["edges"][0]["target"]


def _spec_node_no_id(g):
    del g["nodes"][1]["id"]


def _dangling(g):
    g["edges"].append(edge("big", "ghost"))


def _dangling_source(g):
    g["edges"].append(edge("ghost", "done"))


def _into_start(g):
    g["edges"][3] = edge("check", "start", "false")
    g["nodes"][1]["max_iterations"] = 3


def _out_of_end(g):
    g["nodes"].append(node("done2", "end"))
    g["edges"].append(edge("done", "done2"))


def _dup_edge(g):
    g["edges"].append(edge("start", "calc"))


def _dup_edge_id(g):
    g["edges"][0]["id"] = "e1"
    g["edges"][1]["id"] = "e1"


def _handle_on_plain(g):
    g["edges"][0]["source_handle"] = "out"


def _unknown_handle(g):
    g["edges"][2]["source_handle"] = "yes"


def _missing_handle(g):
    g["edges"][3].pop("source_handle")




def _dup_case_handle(g):
    g["nodes"][2]["config"] = {
        "cases": [{"handle": "true", "expression": "total > 10"}, {"handle": "true", "expression": "total > 5"}]
    }
    g["edges"][3]["source_handle"] = "default"


def _unreachable(g):
    g["nodes"].append(transform("orphan", z="x"))
    g["edges"].append(edge("orphan", "done"))


def _dead_end(g):
    g["nodes"].append(transform("stray", z="x"))
    g["edges"].append(edge("calc", "stray"))


def _join_one_input(g):
    g["nodes"].append(node("j", "join"))
    g["edges"][4] = edge("big", "j")
    g["edges"].append(edge("j", "done"))


def _unbounded_loop(g):
    g["edges"][3] = edge("check", "calc", "false")


def _bad_expression(g):
    g["nodes"][1]["config"]["set"]["total"] = "x +"




def _unknown_var_condition(g):
    g["nodes"][2]["config"]["expression"] = "totl > 10"


def _unknown_var_case(g):
    g["nodes"][2]["config"] = {
        "cases": [{"handle": "true", "expression": "total > 10"}, {"handle": "false", "expression": "nope"}]
    }
    g["edges"].append(edge("check", "done", "default"))


def _unknown_end_output(g):
    g["nodes"][4]["config"]["output"] = ["total", "nope"]


def _reserved_write(g):
    g["nodes"][3]["config"]["set"] = {"input": "1", "label": "'big'"}


def _bad_input_schema(g):
    g["input_schema"] = {"type": "object", "properties": {"x": {"type": "numbr"}}}


def _input_not_object(g):
    g["input_schema"] = {"type": "string"}


def _parallel_merge(g):
    g.clear()
    g.update(fan_out(transform("a", ra="x"), transform("b", rb="x"), join=False))


def _parallel_merge_fork_edge(g):
    # start fires both start->m and start->a->m: m would run twice, concurrently.
    g.clear()
    g.update(
        graph(
            [node("start", "start"), transform("a", ra="x"), transform("m", rm="x"), node("done", "end")],
            [edge("start", "a"), edge("start", "m"), edge("a", "m"), edge("m", "done")],
        )
    )


def _parallel_writes(g):
    g.clear()
    g.update(fan_out(transform("a", total="x"), transform("b", total="x * 2")))


def _parallel_writes_replace_reducer(g):
    g.clear()
    g.update(fan_out(transform("a", total="x"), transform("b", total="x * 2"), state={"total": {"reducer": "replace"}}))


def _parallel_writes_after_partial_join(g):
    # x and y meet at j1, but z never does: w (after j1) runs beside z.
    g.clear()
    g.update(
        graph(
            [
                node("start", "start"),
                transform("x1", a="x"),
                transform("y1", b="x"),
                transform("z", k="x"),
                node("j1", "join"),
                transform("w", k="a + b"),
                node("j2", "join"),
                node("done", "end"),
            ],
            [
                edge("start", "x1"),
                edge("start", "y1"),
                edge("start", "z"),
                edge("x1", "j1"),
                edge("y1", "j1"),
                edge("j1", "w"),
                edge("w", "j2"),
                edge("z", "j2"),
                edge("j2", "done"),
            ],
        )
    )


def _parallel_merge_loop_fan_out(g):
    # m fans out to a and b, and both come back to m: two tokens re-enter m at once.
    g.clear()
    g.update(
        graph(
            [
                node("start", "start"),
                {**transform("m", n="x"), "max_iterations": 3},
                transform("a", ra="n"),
                transform("b", rb="n"),
                node("done", "end"),
            ],
            [edge("start", "m"), edge("m", "a"), edge("m", "b"), edge("m", "done"), edge("a", "m"), edge("b", "m")],
        )
    )


def _parallel_merge_handle_fan_out(g):
    # Two edges on one handle fire together: a fan-out even from a routing node.
    g["nodes"].append(transform("small", size="'small'"))
    g["edges"].append(edge("check", "small", "true"))
    g["edges"].append(edge("small", "done"))


DEFECTS: list[tuple[str, Callable[[dict], None], list[tuple[str | None, str, str]], str]] = [
    ("duplicate_node_id", _dup_node, [("calc", "id", "duplicate_node_id")], "duplicate node id"),
    ("missing_start", _no_start, [(None, "nodes", "missing_start")], "no start node"),
    (
        "multiple_start",
        _two_starts,
        [("start", "kind", "multiple_start"), ("start2", "kind", "multiple_start")],
        "more than one start",
    ),
    ("missing_end", _no_end, [(None, "nodes", "missing_end")], "no end node"),
    ("unknown_kind", _unknown_kind, [("big", "kind", "unknown_kind")], "unknown node kind 'frobnicate'"),
    ("config_unknown_field", _config_extra, [("calc", "config.sett", "invalid_config")], "unknown field"),
    (
        "config_condition_mode",
        _config_condition_mode,
        [("check", "config", "invalid_config")],
        "exactly one of 'expression' or 'cases'",
    ),
    ("config_bad_state_key", _config_bad_key, [("calc", "config.set", "invalid_config")], "not a valid name"),
    ("spec_bad_field", _spec_bad_field, [("calc", "max_iterations", "invalid_spec")], "greater than or equal to 1"),
    ("spec_edge_missing_target", _spec_edge_missing_target, [(None, "edges[0].target", "invalid_spec")], "required"),
    ("spec_node_without_id", _spec_node_no_id, [(None, "nodes[1].id", "invalid_spec")], "required"),
    ("dangling_edge_target", _dangling, [(None, "edges[5].target", "dangling_edge")], "'ghost' is not a node"),
    ("dangling_edge_source", _dangling_source, [(None, "edges[5].source", "dangling_edge")], "'ghost' is not a node"),
    ("edge_into_start", _into_start, [(None, "edges[3].target", "edge_into_start")], "start node has no incoming"),
    ("edge_out_of_end", _out_of_end, [(None, "edges[5].source", "edge_out_of_end")], "end node has no outgoing"),
    ("duplicate_edge", _dup_edge, [(None, "edges[5]", "duplicate_edge")], "duplicate of edges[0]"),
    ("duplicate_edge_id", _dup_edge_id, [(None, "edges[1].id", "duplicate_edge_id")], "'e1'"),
    (
        "handle_on_plain_node",
        _handle_on_plain,
        [(None, "edges[0].source_handle", "handle_on_plain_node")],
        "no named handles",
    ),
    (
        "unknown_handle",
        _unknown_handle,
        [(None, "edges[2].source_handle", "unknown_handle"), ("check", "handles.true", "unwired_handle")],
        "no handle 'yes'",
    ),
    (
        "missing_handle",
        _missing_handle,
        [(None, "edges[3].source_handle", "missing_handle"), ("check", "handles.false", "unwired_handle")],
        "must name one of its handles: true, false",
    ),
    ("unwired_handle", _unwired, [("check", "handles.false", "unwired_handle")], "'false' is not connected"),
    ("duplicate_handle", _dup_case_handle, [("check", "config.cases[1].handle", "duplicate_handle")], "earlier case"),
    ("unreachable", _unreachable, [("orphan", "incoming", "unreachable")], "not reachable from the start"),
    ("dead_end", _dead_end, [("stray", "outgoing", "dead_end")], "no outgoing edges"),
    ("join_inputs", _join_one_input, [("j", "incoming", "join_inputs")], "at least 2 incoming edges (has 1)"),
    (
        "unbounded_loop",
        _unbounded_loop,
        [("calc", "max_iterations", "unbounded_loop")],
        "unbounded loop through calc, check",
    ),
    ("invalid_expression", _bad_expression, [("calc", "config.set.total", "invalid_expression")], "invalid expression"),
    (
        "unknown_variable_transform",
        _unknown_var_transform,
        [("calc", "config.set.total", "unknown_variable")],
        "unknown variable 'y'",
    ),
    (
        "unknown_variable_condition",
        _unknown_var_condition,
        [("check", "config.expression", "unknown_variable")],
        "unknown variable 'totl'",
    ),
    (
        "unknown_variable_case",
        _unknown_var_case,
        [("check", "config.cases[1].expression", "unknown_variable")],
        "unknown variable 'nope'",
    ),
    (
        "unknown_variable_end",
        _unknown_end_output,
        [("done", "config.output[1]", "unknown_variable")],
        "unknown variable 'nope'",
    ),
    ("reserved_name", _reserved_write, [("big", "writes.input", "reserved_name")], "'input' is reserved"),
    (
        "invalid_input_schema",
        _bad_input_schema,
        [(None, "input_schema.properties.x.type", "invalid_input_schema")],
        "not a valid JSON Schema",
    ),
    (
        "input_schema_not_object",
        _input_not_object,
        # x is no longer an input property, so calc's "x + 1" names an unknown variable too.
        [(None, "input_schema.type", "invalid_input_schema"), ("calc", "config.set.total", "unknown_variable")],
        "must describe an object",
    ),
    ("parallel_merge", _parallel_merge, [("done", "incoming", "parallel_merge")], "merge them with a join"),
    (
        "parallel_merge_fork_edge",
        _parallel_merge_fork_edge,
        [("m", "incoming", "parallel_merge")],
        "fan-out at 'start'",
    ),
    (
        "parallel_merge_loop_fan_out",
        _parallel_merge_loop_fan_out,
        [("m", "incoming", "parallel_merge")],
        "fan-out at 'm'",
    ),
    (
        "parallel_merge_handle_fan_out",
        _parallel_merge_handle_fan_out,
        [("done", "incoming", "parallel_merge")],
        "fan-out at 'check'",
    ),
    (
        "parallel_writes",
        _parallel_writes,
        [("a", "writes.total", "parallel_writes"), ("b", "writes.total", "parallel_writes")],
        "declare a reducer for 'total'",
    ),
    (
        "parallel_writes_replace_reducer",
        _parallel_writes_replace_reducer,
        [("a", "writes.total", "parallel_writes"), ("b", "writes.total", "parallel_writes")],
        "also written by 'b'",
    ),
    (
        "parallel_writes_after_partial_join",
        _parallel_writes_after_partial_join,
        [("w", "writes.k", "parallel_writes"), ("z", "writes.k", "parallel_writes")],
        "also written by 'z'",
    ),
]


@pytest.mark.parametrize(("mutate", "expected", "fragment"), [d[1:] for d in DEFECTS], ids=[d[0] for d in DEFECTS])
def test_defect(mutate, expected, fragment):
    data = baseline()
    mutate(data)
    result = validate_spec(copy.deepcopy(data))
    assert not result.ok
    assert keyed(result) == expected, [str(i) for i in result.issues]
    assert fragment in result.issues[0].message


def test_defect_codes_are_distinct_per_defect_kind():
    codes = {code for _, _, expected, _ in DEFECTS for _, _, code in expected}
    assert len(codes) >= 18


def test_a_spec_that_is_not_an_object():
    result = validate_spec([])  # type: ignore[arg-type]
    assert result.spec is None
    assert keyed(result) == [(None, "spec", "invalid_spec")]


def test_parse_errors_keep_the_node_id_and_the_graph_checks_go_on():
    data = baseline()
    data["nodes"][2]["timeout_seconds"] = -1
    data["edges"] = []  # every node is now unreachable: reported with the parse error
    result = validate_spec(data)
    assert result.spec is None and not result.ok
    issues = keyed(result)
    assert ("check", "timeout_seconds", "invalid_spec") in issues
    assert ("calc", "incoming", "unreachable") in issues
    assert ("start", "outgoing", "dead_end") in issues
    # The node that did not parse takes part in the graph checks only.
    assert [i for i in issues if i[0] == "check" and i[2] != "invalid_spec"] == [
        ("check", "incoming", "unreachable"), ("check", "outgoing", "dead_end")
    ]


def test_one_pass_reports_every_kind_of_error_past_a_malformed_node_id():
    data = baseline()
    data["nodes"][3]["id"] = "9big"  # malformed id: a parse error
    data["edges"][2]["target"] = data["edges"][4]["source"] = "9big"
    data["nodes"][1]["config"]["set"]["total"] = "x +"  # a syntax error in another node
    data["nodes"].append(node("odd", "no_such_kind"))  # unknown kind, unreachable
    data["nodes"][2]["config"]["expression"] = "total > len('a' * 10**9)"  # constant over the limits
    data["edges"].append(edge("start", "ghost"))  # dangling edge
    result = validate_spec(data)
    assert result.spec is None
    issues = keyed(result)
    assert ("9big", "id", "invalid_spec") in issues
    assert ("calc", "config.set.total", "invalid_expression") in issues
    assert ("check", "config.expression", "expression_limit") in issues
    assert ("odd", "kind", "unknown_kind") in issues
    assert ("odd", "incoming", "unreachable") in issues
    assert (None, "edges[5].target", "dangling_edge") in issues
    # The malformed node keeps its id: the edges into and out of it are not dangling.
    assert not [i for i in issues if i[2] == "dangling_edge" and i[1] != "edges[5].target"]
    paths = {i.code: i.path for i in result.issues}
    assert paths["invalid_spec"] == "nodes[3].id"
    assert paths["expression_limit"] == "nodes[2].config.expression"


def test_a_broken_edge_is_reported_with_the_other_errors_without_reachability_noise():
    data = baseline()
    del data["edges"][4]["target"]
    data["nodes"][1]["config"]["set"]["total"] = "x +"
    issues = keyed(validate_spec(data))
    assert (None, "edges[4].target", "invalid_spec") in issues
    assert ("calc", "config.set.total", "invalid_expression") in issues
    # With an edge missing, reachability cannot be judged: no dead_end for 'big'.
    assert not [i for i in issues if i[2] in ("dead_end", "unreachable")]


@pytest.mark.parametrize(
    ("source", "part"),
    [
        ("x > 10**10**10", "10**10**10"),
        ("total == 'a' * 10**9", "'a' * 10**9"),
        ("total in range(10**9)", "range(10**9)"),
        ("total > len('ab'.ljust(10**8))", "'ab'.ljust(10**8)"),
    ],
)
def test_constant_parts_over_the_limits_are_refused_on_the_node_and_field(source, part):
    data = baseline()
    data["nodes"][2]["config"]["expression"] = source
    result = validate_spec(data)
    assert keyed(result) == [("check", "config.expression", "expression_limit")]
    assert part in result.issues[0].message
    assert result.issues[0].path == "nodes[2].config.expression"


@pytest.mark.parametrize(
    "source",
    ["total > 2**64", "total > 10 and x < 1/0", "[i * 2 for i in range(100)] == []", "total > len('a' * 1000)"],
)
def test_constant_parts_within_the_limits_pass(source):
    # 1/0 may sit in a branch that never runs: it stays a run-time error.
    data = baseline()
    data["nodes"][2]["config"]["expression"] = source
    assert validate_spec(data).ok


def test_several_defects_are_all_reported_in_a_stable_order():
    data = baseline()
    _unknown_var_transform(data)
    _unwired(data)
    _dangling(data)
    first = validate_spec(copy.deepcopy(data))
    data["nodes"].reverse()
    second = validate_spec(data)
    assert (
        keyed(first)
        == keyed(second)
        == [
            (None, "edges[4].target", "dangling_edge"),
            ("calc", "config.set.total", "unknown_variable"),
            ("check", "handles.false", "unwired_handle"),
        ]
    )


def test_issue_string_form():
    assert (
        str(Issue("calc", "config.set.total", "unknown variable 'y'")) == "calc.config.set.total: unknown variable 'y'"
    )
    assert str(Issue(None, "nodes", "the graph has no start node")) == "nodes: the graph has no start node"


# --- valid graphs -----------------------------------------------------------------------------


def _valid_fan_out_join():
    return fan_out(transform("a", ra="x"), transform("b", rb="x + 1"), transform("c", rc="x + 2"))


def _valid_cases_or_merge():
    return graph(
        [
            node("start", "start"),
            node(
                "route",
                "condition",
                cases=[{"handle": "small", "expression": "x < 10"}, {"handle": "medium", "expression": "x < 100"}],
            ),
            transform("s", size="'small'"),
            transform("m", size="'medium'"),
            transform("l", size="'large'"),
            transform("after", summary="size"),  # OR-merge of three exclusive branches
            node("done", "end", output=["summary"]),
        ],
        [
            edge("start", "route"),
            edge("route", "s", "small"),
            edge("route", "m", "medium"),
            edge("route", "l", "default"),
            edge("s", "after"),
            edge("m", "after"),
            edge("l", "after"),
            edge("after", "done"),
        ],
    )


def _valid_bounded_loop():
    g = baseline()
    _unbounded_loop(g)
    g["nodes"][2]["max_iterations"] = 5
    return g


def _valid_reducer_writes():
    return fan_out(
        transform("a", items="[x]"),
        transform("b", items="[x + 1]", total="x"),
        transform("c", total="x * 2"),
        state={"items": {"reducer": "extend"}, "total": {"reducer": "add", "default": 0}},
    )


def _valid_exclusive_writes():
    # Two writers of one key separated by a condition never run together.
    g = baseline()
    g["nodes"].append(transform("small", label="'small'"))
    g["edges"][3] = edge("check", "small", "false")
    g["edges"].append(edge("small", "done"))
    return g


def _valid_join_after_condition():
    g = baseline()
    g["nodes"].append(transform("small", label="'small'"))
    g["nodes"].append(node("j", "join"))
    g["edges"][3] = edge("check", "small", "false")
    g["edges"][4] = edge("big", "j")
    g["edges"] += [edge("small", "j"), edge("j", "done")]
    return g


def _valid_nested_fan_out():
    # start -> (a -> (a1, a2) -> ja) and b, both into j; a1 and a2 write different keys.
    return graph(
        [
            node("start", "start"),
            transform("a", p="x"),
            transform("a1", q="p"),
            transform("a2", r="p"),
            node("ja", "join"),
            transform("b", s="x"),
            node("j", "join"),
            transform("after", total="q + r + s"),
            node("done", "end"),
        ],
        [
            edge("start", "a"),
            edge("start", "b"),
            edge("a", "a1"),
            edge("a", "a2"),
            edge("a1", "ja"),
            edge("a2", "ja"),
            edge("ja", "j"),
            edge("b", "j"),
            edge("j", "after"),
            edge("after", "done"),
        ],
    )


def _valid_merge_after_join_then_condition():
    # Both branches meet at j; after it, a condition's two exits merge at m: no join needed.
    return graph(
        [
            node("start", "start"),
            transform("a", ra="x"),
            transform("b", rb="x"),
            node("j", "join"),
            node("c", "condition", expression="ra > rb"),
            transform("p", out="ra"),
            transform("m", total="ra + rb"),
            node("done", "end"),
        ],
        [
            edge("start", "a"),
            edge("start", "b"),
            edge("a", "j"),
            edge("b", "j"),
            edge("j", "c"),
            edge("c", "m", "true"),
            edge("c", "p", "false"),
            edge("p", "m"),
            edge("m", "done"),
        ],
    )


def _valid_loop_inside_branch():
    # A bounded retry loop inside one parallel branch is not a parallel merge.
    return graph(
        [
            node("start", "start"),
            {**transform("work", n="x"), "max_iterations": 3},
            node("again", "condition", expression="n < 3"),
            transform("other", o="x"),
            node("j", "join"),
            node("done", "end"),
        ],
        [
            edge("start", "work"),
            edge("start", "other"),
            edge("work", "again"),
            edge("again", "work", "true"),
            edge("again", "j", "false"),
            edge("other", "j"),
            edge("j", "done"),
        ],
    )


VALID = {
    "baseline": baseline,
    "fan_out_join": _valid_fan_out_join,
    "condition_cases_or_merge": _valid_cases_or_merge,
    "bounded_loop": _valid_bounded_loop,
    "reducer_parallel_writes": _valid_reducer_writes,
    "exclusive_writes": _valid_exclusive_writes,
    "join_after_condition": _valid_join_after_condition,
    "nested_fan_out": _valid_nested_fan_out,
    "merge_after_join_then_condition": _valid_merge_after_join_then_condition,
    "loop_inside_branch": _valid_loop_inside_branch,
}


@pytest.mark.parametrize("build", VALID.values(), ids=VALID.keys())
def test_valid_graph(build):
    result = validate_spec(build())
    assert [str(i) for i in result.issues] == []
    assert result.ok


def test_input_names_state_keys_and_functions_are_known():
    g = baseline()
    g["state"] = {"seen": {"default": []}}
    g["nodes"][1]["config"]["set"]["total"] = "len(seen) + x + input['x']"
    assert validate_spec(g).ok


def test_unused_reducer_is_a_warning_not_an_error():
    g = baseline()
    g["state"] = {"totl": {"reducer": "add"}}
    result = validate_spec(g)
    assert result.ok
    assert [(w.node_id, w.field, w.code) for w in result.warnings] == [(None, "state.totl.reducer", "unused_reducer")]
    assert result.as_dict()["warnings"][0]["code"] == "unused_reducer"


def test_retry_with_a_timeout_on_a_step_not_safe_to_repeat_is_a_warning():
    def post(node_id: str, **fields: Any) -> dict[str, Any]:
        call = node(node_id, "tool", tool="http_request", args={"method": "POST", "url": "https://example.com/"})
        return {**call, "timeout_seconds": 1, "retry": {"max_attempts": 3}, **fields}

    g = graph(
        [node("start", "start"), post("unsafe"), post("declared_safe", repeat_safe=True), post("no_retry", retry={"max_attempts": 1}), node("done", "end")],
        [edge("start", "unsafe"), edge("unsafe", "declared_safe"), edge("declared_safe", "no_retry"), edge("no_retry", "done")],
    )
    result = validate_spec(g)
    assert result.ok, result.as_dict()  # a warning, not an error
    assert [(w.node_id, w.field, w.code) for w in result.warnings] == [("unsafe", "retry", "unsafe_retry")]


def test_reading_an_undeclared_input_key_is_a_warning_naming_it():
    # The user followed "use input.name": validation passed, the run with input {} failed.
    g = baseline()
    g["nodes"][1]["config"]["set"]["total"] = "'Hello, ' + input.name + input['x'] + input['nick']"
    result = validate_spec(g)
    assert result.ok  # a caller may still pass the key: a warning, not an error
    found = [(w.node_id, w.field, w.code) for w in result.warnings]
    assert found == [("calc", "config.set.total", "undeclared_input_key")] * 2
    messages = [w.message for w in result.warnings]
    assert "input.name" in messages[0] and "Add 'name' to the input schema" in messages[0]
    assert "'nick'" in messages[1]


def test_pydantic_length_messages_are_phrased_for_people():
    g = baseline()
    g["nodes"][1]["config"]["set"] = {}
    result = validate_spec(g)
    assert [(i.node_id, i.field, i.message) for i in result.issues if i.node_id == "calc"] == [
        ("calc", "config.set", "add at least one key")
    ]


def test_declared_input_keys_raise_no_warning():
    g = baseline()
    g["input_schema"]["properties"]["name"] = {"type": "string"}
    g["nodes"][1]["config"]["set"]["total"] = "input.name + input['x']"
    assert validate_spec(g).warnings == []


def test_as_dict_shape():
    data = baseline()
    _unwired(data)
    assert validate_spec(data).as_dict() == {
        "valid": False,
        "errors": [
            {
                "node_id": "check",
                "field": "handles.false",
                "message": "handle 'false' is not connected to any node",
                "code": "unwired_handle",
                "node": "check",
                "path": "nodes[2]",  # a pseudo-field points at the node itself
            }
        ],
        "warnings": [],
    }


def test_export_schemas():
    schemas = export_schemas()
    assert schemas["graph"]["title"] == "GraphSpec"
    nodes = schemas["nodes"]
    assert {"start", "end", "transform", "condition", "join"} <= set(nodes)
    assert nodes["transform"]["config"]["required"] == ["set"]
    assert nodes["transform"]["handles"] == {"names": None, "optional": [], "dynamic": False}
    assert nodes["condition"]["handles"] == {"names": ["true", "false"], "optional": [], "dynamic": True}
    assert "output" in nodes["end"]["config"]["properties"]
    assert all(isinstance(info["description"], str) and info["description"] for info in nodes.values())


# --- checks contributed by other kinds (llm, tool, approval) ----------------------------------


def _with_node(extra: dict[str, Any], handles: tuple[str, ...] = ()) -> dict[str, Any]:
    """baseline with ``extra`` inserted between big and done (wired per handle, or plain)."""
    g = baseline()
    g["nodes"].insert(-1, extra)
    g["edges"][4] = edge("big", extra["id"])
    if handles:
        g["edges"] += [edge(extra["id"], "done", h) for h in handles]
    else:
        g["edges"].append(edge(extra["id"], "done"))
    return g


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (node("ask", "llm", provider="nope", prompt="hi"), ("ask", "config.provider", "unknown_provider")),
        (node("ask", "llm", model="gpt-nope", prompt="hi"), ("ask", "config.model", "unknown_model")),
        (node("call", "tool", tool="no_such_tool"), ("call", "config.tool", "unknown_tool")),
    ],
    ids=["unknown_provider", "unknown_model", "unknown_tool"],
)
@pytest.mark.django_db  # an unknown provider name is looked up among the providers added in the app
def test_kind_checks_are_reported(extra, expected):
    result = validate_spec(_with_node(extra))
    assert expected in keyed(result), [str(i) for i in result.issues]


def test_llm_output_key_is_a_known_name():
    g = _with_node(node("ask", "llm", prompt="total is {{ total }}", output_key="reply"))
    g["nodes"][-1]["config"]["output"] = ["total", "reply"]
    assert validate_spec(g).ok, [str(i) for i in validate_spec(g).issues]


def test_approval_requires_approved_but_not_rejected():
    assert validate_spec(_with_node(node("gate", "approval"), handles=("approved",))).ok
    result = validate_spec(_with_node(node("gate", "approval"), handles=("rejected",)))
    assert keyed(result) == [("gate", "handles.approved", "unwired_handle")]


def test_issue_messages_quoting_spec_values_are_bounded():
    g = baseline()
    g["nodes"][3]["kind"] = "k" * 100_000
    g["edges"].append({"source": "s" * 100_000, "target": "calc"})
    result = validate_spec(g)
    assert result.issues and all(len(i.message) <= 2100 for i in result.issues), [len(i.message) for i in result.issues]
    assert any("(100" in i.message and "characters)" in i.message for i in result.issues)


def test_a_quorum_the_named_approvers_alone_cannot_reach_is_refused():
    def gate(**config: Any) -> ValidationResult:
        return validate_spec(_with_node(node("gate", "approval", **config), handles=("approved",)))

    result = gate(quorum=3, approvers=["appr", "appr"])
    assert keyed(result) == [("gate", "config.quorum", "quorum_unreachable")]
    assert "needs 3 approvals but only 1 approver is named" in result.issues[0].message
    assert gate(quorum=2, approvers=["ann", "bob"]).ok
    assert gate(quorum=3, approvers=["ann"], approver_groups=["finance"]).ok  # the group may supply the rest
    assert gate(quorum=3).ok  # anyone with the approver role
