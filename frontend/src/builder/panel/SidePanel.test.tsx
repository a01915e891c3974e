// SidePanel: the node form from its kind's schema, coalesced undo, server errors on fields, focus, read-only.
import { act, fireEvent, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { EditorView } from "@codemirror/view";
import { afterEach, describe, expect, it, vi } from "vitest";
import { hasPendingEdits } from "../pendingEdits";
import { SidePanel } from "./SidePanel";
import { renderInBuilder, sampleSpec, scriptFetch } from "./testing";
import * as factories from "../../test/factories";

// The first render imports CodeMirror, rjsf and ajv; the shared 2-core machine makes that slow.
vi.setConfig({ testTimeout: 30_000 });
afterEach(() => vi.unstubAllGlobals());

function editorView(id: string): EditorView {
  const content = document.getElementById(id);
  if (!content) throw new Error(`no element #${id}`);
  const view = EditorView.findFromDOM(content);
  if (!view) throw new Error(`#${id} is not in a CodeMirror editor`);
  return view;
}

function editorViewIn(scope: HTMLElement): EditorView {
  const content = scope.querySelector(".cm-content");
  const view = content ? EditorView.findFromDOM(content as HTMLElement) : null;
  if (!view) throw new Error("no CodeMirror editor in this element");
  return view;
}

function typeInto(view: EditorView, text: string) {
  for (const ch of text) {
    act(() => view.dispatch({ changes: { from: view.state.doc.length, insert: ch }, userEvent: "input.type" }));
  }
}

const okCheck = () => scriptFetch(() => [200, { ok: true, errors: [] }]);

describe("SidePanel with one node selected", () => {
  it("renders the condition's config form from its schema with an expression editor", () => {
    okCheck();
    renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["route"] } });
    expect(screen.getByRole("heading", { name: "route" })).toBeTruthy();
    const view = editorView("config.expression");
    expect(view.state.doc.toString()).toBe("priority > 2");
    // The schema's title and description label the field; "cases" is offered too.
    expect(screen.getByText("Two-way condition: takes the handle 'true' or 'false'.")).toBeTruthy();
    expect(document.getElementById("config.cases")).toBeTruthy();
  });

  it("typing in one expression is one undo step with one coalesce key", async () => {
    okCheck();
    const { harness } = renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["route"] } });
    typeInto(editorView("config.expression"), " and ticket");
    await waitFor(() => expect(harness.api().spec.nodes[1]?.config.expression).toBe("priority > 2 and ticket"));
    expect(new Set(harness.changeKeys)).toEqual(new Set(["node:route:config.expression"]));
    expect(harness.changeKeys.length).toBe(" and ticket".length);
    act(() => harness.api().undo());
    expect(harness.api().spec.nodes[1]?.config.expression).toBe("priority > 2");
    expect(harness.api().canUndo).toBe(false);
    // The editor follows the undo.
    expect(editorView("config.expression").state.doc.toString()).toBe("priority > 2");
  });

  it("edits the node's label and policies with their own keys", async () => {
    okCheck();
    const user = userEvent.setup();
    const { harness } = renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["ask"] } });
    const label = document.getElementById("node.label") as HTMLInputElement;
    expect(label.value).toBe("Ask model");
    await user.clear(label);
    await user.type(label, "Summarise");
    expect(harness.api().spec.nodes[3]?.label).toBe("Summarise");
    expect(new Set(harness.changeKeys)).toEqual(new Set(["node:ask:settings.label"]));
    const timeout = document.getElementById("node.timeout_seconds") as HTMLInputElement;
    await user.type(timeout, "30");
    expect(harness.api().spec.nodes[3]?.timeout_seconds).toBe(30);
    expect(harness.changeKeys.at(-1)).toBe("node:ask:settings.timeout_seconds");
    const repeat = document.getElementById("node.repeat_safe") as HTMLSelectElement;
    fireEvent.change(repeat, { target: { value: within(repeat).getByText(/^No:/).getAttribute("value") } });
    await waitFor(() => expect(harness.api().spec.nodes[3]?.repeat_safe).toBe(false));
    // Typing in the label then the timeout: two undo steps, not one per keystroke.
    act(() => harness.api().undo());
    act(() => harness.api().undo());
    expect(harness.api().spec.nodes[3]?.label).toBe("Summarise");
    expect(harness.api().spec.nodes[3]?.timeout_seconds).toBeUndefined();
  });

  it("offers 'Safe to repeat' only where the kind uses it, and keeps a refused value visible to clear", async () => {
    okCheck();
    const { harness } = renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["route"] } });
    // A condition is always safe to repeat: no choice offered.
    expect(document.getElementById("node.repeat_safe")?.tagName).not.toBe("SELECT");
    expect(screen.queryByText("Safe to repeat")).toBeNull();
    act(() => harness.api().change((spec) => ({ ...spec, nodes: spec.nodes.map((n) => (n.id === "route" ? { ...n, repeat_safe: false } : n)) }), "test"));
    const repeat = (await waitFor(() => {
      const el = document.getElementById("node.repeat_safe");
      expect(el?.tagName).toBe("SELECT");
      return el;
    })) as HTMLSelectElement;
    fireEvent.change(repeat, { target: { value: within(repeat).getByText(/^As the kind says/).getAttribute("value") } });
    await waitFor(() => expect(harness.api().spec.nodes[1]?.repeat_safe).toBeUndefined());
  });

  it("opening a node does not change the graph", () => {
    okCheck();
    const { harness } = renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["ask"] } });
    expect(harness.changeKeys).toEqual([]);
    expect(harness.api().canUndo).toBe(false);
  });

  it("shows the server's errors for the node on their fields and focuses the selected field", async () => {
    okCheck();
    renderInBuilder(<SidePanel />, {
      spec: sampleSpec(),
      selection: { nodes: ["calc"], field: "config.set.score" },
      validation: factories.validation({
        valid: false,
        errors: [
          factories.issue({ code: "unknown_variable", node: "calc", field: "config.set.score", message: "unknown variable 'priorty'" }),
          factories.issue({ code: "invalid", node: "route", field: "config.expression", message: "not for this node" }),
          factories.issue({ code: "invalid", node: "calc", field: "max_iterations", message: "a loop needs max_iterations" }),
        ],
        handles: {},
        estimate: factories.estimate({ calc: { usd: "0.0021", tokens: 350 } }, { nodes: ["calc"], usd: "0.0021", tokens: 350 }),
      }),
    });
    const problems = screen.getByRole("region", { name: "Problems" });
    expect(within(problems).getByText(/2 problems/)).toBeTruthy();
    expect(screen.queryByText("not for this node")).toBeNull();
    // On the field itself, under the editor and under the policy input.
    const scoreField = document.getElementById("config.set.score")!.closest(".form-group") as HTMLElement;
    expect(within(scoreField).getByText("unknown variable 'priorty'")).toBeTruthy();
    const iterField = document.getElementById("node.max_iterations")!.closest(".form-group") as HTMLElement;
    expect(within(iterField).getByText("a loop needs max_iterations")).toBeTruthy();
    await waitFor(() => expect(document.activeElement?.id).toBe("config.set.score"));
    expect(screen.getByText(/\$0\.0021 · 350 tokens/)).toBeTruthy();
  });

  it("read-only mode shows values without inputs", () => {
    renderInBuilder(<SidePanel />, { spec: sampleSpec(), readOnly: true, selection: { nodes: ["ask"] } });
    expect(screen.getByText("Summarise {{ ticket }}")).toBeTruthy();
    expect(screen.queryByText(/read.only/i)).toBeNull();
    expect(document.querySelector("input, textarea, select, [contenteditable=true]")).toBeNull();
    expect(screen.queryByRole("button", { name: "Test node" })).toBeNull();
  });

  it("read-only mode shows a transform's expressions as code, not JSON strings", () => {
    const spec = sampleSpec();
    const calc = spec.nodes.find((n) => n.id === "calc")!;
    calc.config = { set: { greeting: '"Hello, " + "world"' } };
    renderInBuilder(<SidePanel />, { spec, readOnly: true, selection: { nodes: ["calc"] } });
    const code = screen.getByText('"Hello, " + "world"');
    expect(code.tagName).toBe("CODE");
    expect(screen.queryByText(/\\"/)).toBeNull();
  });
});

describe("SidePanel with several nodes selected", () => {
  it("says how many and edits nothing", () => {
    okCheck();
    const { harness } = renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["route", "calc"] } });
    expect(screen.getByRole("heading", { name: "2 nodes selected" })).toBeTruthy();
    expect(document.querySelector("form")).toBeNull();
    expect(harness.changeKeys).toEqual([]);
  });
});

describe("typing fast in node forms while the panel renders a late copy of the state", () => {
  it("keeps every keystroke in an rjsf text field (the node label)", async () => {
    okCheck();
    const user = userEvent.setup({ delay: null });
    const { harness } = renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["route"] }, lag: true });
    const label = await screen.findByLabelText("Label");
    await user.type(label, "The quick brown fox");
    expect(harness.api().spec.nodes.find((n) => n.id === "route")?.label).toBe("The quick brown fox");
  });
});

describe("typing fast in a JSON editor while the panel renders a late copy of the state", () => {
  it("keeps every keystroke in the graph's input schema", async () => {
    const { harness } = renderInBuilder(<SidePanel />, { spec: { ...sampleSpec(), input_schema: { a: 1 } }, lag: true });
    const view = editorView("graph.input_schema");
    // Each keystroke leaves valid JSON, so each is passed on and comes back a tick late.
    for (const ch of "2345") {
      const at = view.state.doc.toString().lastIndexOf("1") + 1 + view.state.doc.toString().split("1")[1]!.indexOf("\n");
      act(() => view.dispatch({ changes: { from: at, insert: ch }, userEvent: "input.type" }));
    }
    expect(JSON.parse(view.state.doc.toString())).toEqual({ a: 12345 });
    // The harness hands the panel its late copies on the next timer tick.
    await act(() => new Promise((r) => setTimeout(r, 0)));
    expect(JSON.parse(view.state.doc.toString())).toEqual({ a: 12345 });
    expect(harness.api().spec.input_schema).toEqual({ a: 12345 });
  });
});

describe("a transform's set: State key | Expression rows", () => {
  it("Add appends an empty row with its key focused, saved once a key is typed", async () => {
    okCheck();
    const user = userEvent.setup();
    const { harness } = renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["calc"] } });
    const setField = document.getElementById("config.set") as HTMLElement;
    expect(within(setField).getByText("State key")).toBeTruthy();
    expect(within(setField).getByText("Expression")).toBeTruthy();
    expect(within(setField).queryByText("score")).toBeNull(); // the key is in its input, not a column heading
    expect((within(setField).getAllByLabelText("State key")[0] as HTMLInputElement).value).toBe("score");
    const setOf = () => harness.api().spec.nodes.find((n) => n.id === "calc")?.config.set as Record<string, unknown>;

    await user.click(within(setField).getByRole("button", { name: "Add" }));
    const keys = within(setField).getAllByLabelText("State key") as HTMLInputElement[];
    expect(keys).toHaveLength(2);
    expect(keys[1]!.value).toBe("");
    expect(document.activeElement).toBe(keys[1]);
    expect(setOf()).toEqual({ score: "priority * 2" }); // an untouched row is not saved (no newKey, no error)
    expect(screen.queryByText(/newKey/)).toBeNull();

    await user.keyboard("total");
    expect(setOf()).toEqual({ score: "priority * 2", total: "" });
    // Its value is an expression editor, found under the key's id (the error list focuses it).
    typeInto(editorView("config.set.total"), "score + 1");
    await waitFor(() => expect(setOf()).toEqual({ score: "priority * 2", total: "score + 1" }));
    expect(new Set(harness.changeKeys.slice(-3))).toEqual(new Set(["node:calc:config.set.total"]));

    await user.clear(keys[1]!);
    await user.type(keys[1]!, "9bad");
    expect(within(setField).getByText(/Letters, digits and _/)).toBeTruthy();
    expect(setOf()).toEqual({ score: "priority * 2" });
    await user.click(within(setField).getByRole("button", { name: "Remove score" }));
    expect(within(setField).getAllByLabelText("State key")).toHaveLength(1);
  });
});

describe("a transform row with an expression but no state key", () => {
  it("says it is not saved and counts as an unsaved edit until it has a key", async () => {
    okCheck();
    const user = userEvent.setup();
    const { harness } = renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["calc"] } });
    const setField = document.getElementById("config.set") as HTMLElement;
    const setOf = () => harness.api().spec.nodes.find((n) => n.id === "calc")?.config.set as Record<string, unknown>;
    await user.click(within(setField).getByRole("button", { name: "Add" }));
    expect(hasPendingEdits()).toBe(false); // an empty row is just not saved yet
    const row = (within(setField).getAllByLabelText("State key")[1] as HTMLInputElement).closest(".rows-row") as HTMLElement;
    typeInto(editorViewIn(row), "2 + 3");
    await waitFor(() => expect(within(row).getByText("Not saved until it has a state key.")).toBeTruthy());
    expect(hasPendingEdits()).toBe(true);
    expect(setOf()).toEqual({ score: "priority * 2" });
    await user.type(within(row).getByLabelText("State key"), "total");
    await waitFor(() => expect(setOf()).toEqual({ score: "priority * 2", total: "2 + 3" }));
    expect(within(row).queryByText("Not saved until it has a state key.")).toBeNull();
    expect(hasPendingEdits()).toBe(false);
  });
});

describe("a field's errors", () => {
  it("are listed once under a row field (rjsf's field template already shows them)", () => {
    okCheck();
    renderInBuilder(<SidePanel />, {
      spec: sampleSpec(),
      selection: { nodes: ["calc"] },
      validation: factories.validation({
        valid: false,
        errors: [factories.issue({ code: "invalid_spec", node: "calc", field: "config.set", message: "add at least one key" })],
        handles: {},
      }),
    });
    const config = screen.getByRole("region", { name: "Configuration" });
    expect(within(config).getAllByText("add at least one key")).toHaveLength(1);
  });
});

describe("an end node's output", () => {
  it("adds an empty row without an error and says what empty means in words", async () => {
    okCheck();
    const user = userEvent.setup();
    const validation = factories.validation({
      valid: true,
      errors: [],
      handles: {},
    });
    const { harness } = renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["end"] }, validation });
    const output = document.getElementById("config.output") as HTMLElement;
    expect(within(output).getByText("Output state keys")).toBeTruthy();
    expect(within(output).getByText(/Leave empty to return the whole state/)).toBeTruthy();
    expect(screen.queryByText(/None/)).toBeNull();
    await user.click(within(output).getByRole("button", { name: "Add" }));
    const key = within(output).getByLabelText("State key") as HTMLInputElement;
    expect(document.activeElement).toBe(key);
    expect(harness.api().spec.nodes.find((n) => n.id === "end")?.config.output).toBeUndefined();
    expect(output.querySelector(".field-errors")).toBeNull();
    await user.type(key, "score");
    expect(harness.api().spec.nodes.find((n) => n.id === "end")?.config.output).toEqual(["score"]);
    expect(document.getElementById("config.output.0")).toBe(key);
  });

  it("labels fields from the catalogue's titles, not their names", () => {
    okCheck();
    renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["ask"] } });
    expect(screen.getByText("API key environment variable")).toBeTruthy();
    expect(screen.getByText("Maximum output tokens")).toBeTruthy();
    expect(screen.queryByText("Api Key Env")).toBeNull();
    expect(screen.queryByText("Max Tokens")).toBeNull();
  });
});
