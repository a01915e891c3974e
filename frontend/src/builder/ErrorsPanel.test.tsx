// The problems count: a count over the canvas that opens its list on demand; picking an issue selects its node and closes the list.
import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { ReactFlowProvider } from "@xyflow/react";
import { describe, expect, it } from "vitest";
import type { ValidationIssue, ValidationResult } from "../api/types";
import { ErrorsPanel, ValidationStatusContext } from "./ErrorsPanel";
import type { GraphSpec } from "./spec";
import { BuilderContext, useBuilder, useBuilderState } from "./store";

const issue = (node: string | null, message: string, field = ""): ValidationIssue =>
  ({ code: "x", node, node_id: node, field, path: "", message }) as ValidationIssue;

const SPEC: GraphSpec = { name: "g", nodes: [{ id: "t", kind: "transform", config: {}, label: "Tidy" }], edges: [] };

function Selected() {
  const b = useBuilder();
  return <output aria-label="selection">{b.selection.nodes.join(",")}|{b.selection.field ?? ""}</output>;
}

function Harness({ validation, pending = false, failed = null }: { validation: ValidationResult | null; pending?: boolean; failed?: string | null }) {
  const base = useBuilderState(SPEC, { readOnly: false, catalogue: [], validation: null });
  return (
    <BuilderContext.Provider value={{ ...base, validation }}>
      <ReactFlowProvider>
        <ValidationStatusContext.Provider value={{ pending, failed }}>
          <ErrorsPanel />
          <Selected />
          <button type="button">elsewhere</button>
        </ValidationStatusContext.Provider>
      </ReactFlowProvider>
    </BuilderContext.Provider>
  );
}

const result = (errors: ValidationIssue[], warnings: ValidationIssue[] = []): ValidationResult =>
  ({ valid: errors.length === 0, errors, warnings, handles: {}, estimate: null, content_hash: null }) as ValidationResult;

describe("ErrorsPanel", () => {
  it("shows a count, not the list, until asked", async () => {
    const user = userEvent.setup();
    render(<Harness validation={result([issue("t", "required field is missing", "config.set"), issue(null, "the graph has no end node")], [issue("t", "unused")])} />);
    const toggle = screen.getByRole("button", { name: /2 problems · 1 warning/ });
    expect(screen.queryByRole("list", { name: "Problem list" })).toBeNull();
    expect(toggle.getAttribute("aria-expanded")).toBe("false");
    await user.click(toggle);
    const items = screen.getAllByRole("button").filter((b) => b.classList.contains("errors-panel__item"));
    expect(items.map((b) => b.textContent)).toEqual([
      "Tidy (t)config.setrequired field is missing", "Graphthe graph has no end node", "WarningTidy (t)unused",
    ]);
    expect(toggle.getAttribute("aria-expanded")).toBe("true");
  });

  it("selects an issue's node and field and closes the list; Escape and a press elsewhere close it too", async () => {
    const user = userEvent.setup();
    render(<Harness validation={result([issue("t", "required field is missing", "config.set")])} />);
    const toggle = screen.getByRole("button", { name: /1 problem/ });
    await user.click(toggle);
    await user.click(screen.getByText("required field is missing"));
    expect(screen.getByRole("status", { name: "selection" }).textContent).toBe("t|config.set");
    expect(screen.queryByRole("list", { name: "Problem list" })).toBeNull();
    await user.click(toggle);
    await user.keyboard("{Escape}");
    expect(screen.queryByRole("list", { name: "Problem list" })).toBeNull();
    await user.click(toggle);
    await user.click(screen.getByRole("button", { name: "elsewhere" }));
    expect(screen.queryByRole("list", { name: "Problem list" })).toBeNull();
  });

  it("says when it is checking, when there is nothing wrong, and when validation is unavailable", () => {
    const { rerender } = render(<Harness validation={null} />);
    expect(screen.getByRole("button", { name: /Checking/ })).toBeTruthy();
    rerender(<Harness validation={result([])} pending />);
    expect(screen.getByRole("button", { name: /No problems/ }).textContent).toContain("· checking");
    rerender(<Harness validation={result([])} failed="offline" />);
    expect(screen.getByRole("button", { name: /Validation unavailable: offline/ })).toBeTruthy();
  });
});
