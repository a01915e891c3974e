"""docs/graph-format.md is generated from the schemas and must be committed up to date."""
from __future__ import annotations

from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from builder.management.commands.docs_graph_format import BUILTIN_TOOL_MODULES, PAGE, builtin_kinds, render_graph_format
from runs.tools import all_tools


def test_the_committed_page_is_up_to_date():
    # Fails when a spec field, a node config or a tool's arguments changed without
    # `python manage.py docs_graph_format` being run (the page cannot drift).
    assert PAGE.read_text(encoding="utf-8") == render_graph_format(), "run `python manage.py docs_graph_format`"
    call_command("docs_graph_format", "--check")


def test_check_refuses_a_stale_page(tmp_path: Path):
    stale = tmp_path / "graph-format.md"
    stale.write_text(render_graph_format().replace("| `max_steps` |", "| `max_stepz` |"), encoding="utf-8")
    with pytest.raises(CommandError, match="out of date"):
        call_command("docs_graph_format", "--check", "--out", str(stale))
    call_command("docs_graph_format", "--out", str(stale))
    call_command("docs_graph_format", "--check", "--out", str(stale))


def test_the_page_covers_every_kind_and_every_built_in_tool_argument():
    text = render_graph_format()
    kinds = builtin_kinds()
    assert {"start", "end", "transform", "condition", "join", "tool", "llm", "approval", "agent"} <= set(kinds)
    for name in kinds:
        assert f"### `{name}`" in text
    tools = {n: t for n, t in all_tools().items() if t.fn.__module__ in BUILTIN_TOOL_MODULES}
    assert {"http_request", "send_email"} <= set(tools)
    for name, registered in tools.items():
        section = text.split(f"### `{name}`", 1)[1].split("\n### ", 1)[0]
        for field in registered.json_schema().get("properties", {}):
            assert f"| `{field}` |" in section, (name, field)
