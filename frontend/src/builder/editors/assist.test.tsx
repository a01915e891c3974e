// The variable picker, the value preview and the code editor that hosts them (picker inserts, {{ opens it, preview resolves).
import { act, fireEvent, render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { useState } from "react";
import { EditorView } from "@codemirror/view";
import { afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { stubFetch } from "../../shell/testing";
import { insertionFor, pickerVariables } from "../panel/variables";
import { sampleSpec } from "../panel/testing";
import { KINDS } from "../../test/fixtures/nodeKinds";
import { CodeAssistContext, type CodeAssist } from "./assist";
import { CodeEditor } from "./CodeEditor";
import { ValuePreview } from "./ValuePreview";
import { filterVariables, VariablePicker } from "./VariablePicker";

vi.setConfig({ testTimeout: 30_000 });
afterEach(() => vi.unstubAllGlobals());
// jsdom lays nothing out: CodeMirror's measuring after an edit needs these to exist.
beforeAll(() => {
  const empty = { length: 0, item: () => null, [Symbol.iterator]: [][Symbol.iterator] } as unknown as DOMRectList;
  Range.prototype.getClientRects ??= () => empty;
  Range.prototype.getBoundingClientRect ??= () => new DOMRect();
});

/** Type ``text`` into the CodeMirror editor whose content has id ``id``, as keystrokes do (user event "input.type"). */
function typeInto(id: string, text: string) {
  const view = EditorView.findFromDOM(document.getElementById(id)!)!;
  for (const ch of text) {
    const at = view.state.selection.main.head;
    act(() => view.dispatch({ changes: { from: at, insert: ch }, selection: { anchor: at + 1 }, userEvent: "input.type" }));
  }
}

const VARS = [
  { path: "ticket", group: "Run input", detail: '"Refund me"' },
  { path: "order", group: "From Lookup", detail: "{…}" },
  { path: "order.total", group: "From Lookup", detail: "12.5" },
];

describe("pickerVariables", () => {
  it("lists input fields by name, state keys, earlier nodes' outputs with their fields, and undeclared input as input.x", () => {
    const spec = sampleSpec();
    spec.edges = [{ source: "start", target: "route" }, { source: "route", source_handle: "true", target: "ask" }, { source: "ask", target: "calc" }];
    const data = { ticket: "T-1", priority: 3, notes: [], reply: { text: "hi", "odd key": 1 }, input: { ticket: "T-1", extra: true } };
    const vars = pickerVariables(spec, "calc", KINDS, data);
    const paths = vars.map((v) => v.path);
    expect(paths.slice(0, 3)).toEqual(["ticket", "priority", "notes"]);
    expect(vars.find((v) => v.path === "reply")?.group).toBe("From Ask model");
    expect(paths).toContain("reply.text");
    expect(paths).toContain('reply["odd key"]');
    expect(paths).toContain("input.extra");
    expect(paths).not.toContain("input.ticket"); // declared: read by name, the one rule
    expect(vars.find((v) => v.path === "ticket")?.detail).toBe('"T-1"');
  });

  it("writes a template's variable in braces and an expression's bare", () => {
    expect(insertionFor("template", "order.total")).toBe("{{ order.total }}");
    expect(insertionFor("expression", "order.total")).toBe("order.total");
  });
});

describe("VariablePicker", () => {
  it("filters as you type and picks with the keyboard", async () => {
    const onPick = vi.fn();
    render(<VariablePicker id="p" variables={VARS} onPick={onPick} onClose={() => {}} />);
    const search = screen.getByRole("searchbox", { name: "Search variables" });
    expect(document.activeElement).toBe(search);
    expect(screen.getAllByRole("option")).toHaveLength(3);
    await userEvent.type(search, "total");
    expect(screen.getAllByRole("option").map((o) => o.textContent)).toEqual(["order.total12.5"]);
    await userEvent.keyboard("{Enter}");
    expect(onPick).toHaveBeenCalledWith("order.total");
    expect(filterVariables(VARS, "lookup")).toHaveLength(2);
  });

  it("closes on Escape", async () => {
    const onClose = vi.fn();
    render(<VariablePicker id="p" variables={VARS} onPick={() => {}} onClose={onClose} />);
    await userEvent.keyboard("{Escape}");
    expect(onClose).toHaveBeenCalled();
  });
});

describe("ValuePreview", () => {
  it("shows the server's value for the source and the state, debounced", async () => {
    const calls = stubFetch({ "POST /api/v1/graphs/5/draft/preview/": () => ({ body: { ok: true, value: 25, type: "number", display: "25", truncated: false } }) });
    render(<ValuePreview id="v" graphId={5} language="expression" source="order.total * 2" state={{ order: { total: 12.5 } }} stateLabel="pinned data" />);
    await waitFor(() => expect(screen.getByTestId("value-preview").textContent).toBe("25"));
    expect(calls).toHaveLength(1);
    expect(calls[0]!.body).toEqual({ kind: "expression", source: "order.total * 2", state: { order: { total: 12.5 } } });
    expect(screen.getByText("pinned data")).toBeTruthy();
  });

  it("shows the error with where it is", async () => {
    stubFetch({ "POST /api/v1/graphs/5/draft/preview/": () => ({ body: { ok: false, error: { code: "unknown_name", message: "unknown variable totl", line: 1, column: 5, name: "totl" } } }) });
    render(<ValuePreview id="v" graphId={5} language="expression" source="x + totl" state={{ x: 1 }} stateLabel="last test input" />);
    await waitFor(() => expect(screen.getByText(/unknown variable totl \(line 1, column 5\)/)).toBeTruthy());
  });

  it("says how to get test data when there is none, without asking the server", () => {
    const calls = stubFetch({});
    render(<ValuePreview id="v" graphId={5} language="template" source="Hi {{ x }}" state={undefined} stateLabel="no test data" />);
    expect(screen.getByText(/pin test data/)).toBeTruthy();
    expect(calls).toHaveLength(0);
  });
});

function Assisted({ language, start = "" }: { language: "expression" | "template"; start?: string }) {
  const [text, setText] = useState(start);
  const assist: CodeAssist = { graphId: 5, state: { ticket: "T-1", order: { total: 12.5 } }, stateLabel: "pinned data", variables: VARS };
  return (
    <CodeAssistContext.Provider value={assist}>
      <CodeEditor id="f" value={text} onChange={setText} language={language} check={false} ariaLabel="Prompt" />
      <output data-testid="text">{text}</output>
    </CodeAssistContext.Provider>
  );
}

describe("CodeEditor with the node panel's assist", () => {
  it("inserts a picked variable in braces into a template", async () => {
    stubFetch({ "POST /api/v1/graphs/5/draft/preview/": () => ({ body: { ok: true, value: "x", type: "text", display: "x", truncated: false } }) });
    render(<Assisted language="template" start="Total: " />);
    await userEvent.click(screen.getByRole("button", { name: "Insert a variable into Prompt" }));
    await userEvent.click(screen.getByText("order.total"));
    // The caret starts at 0 in a fresh editor: the variable lands there.
    expect(screen.getByTestId("text").textContent).toContain("{{ order.total }}");
    expect(screen.queryByRole("dialog", { name: "Insert a variable" })).toBeNull();
  });

  it("opens the picker on a typed {{ and replaces the braces with the variable", async () => {
    stubFetch({ "POST /api/v1/graphs/5/draft/preview/": () => ({ body: { ok: true, value: "x", type: "text", display: "x", truncated: false } }) });
    render(<Assisted language="template" />);
    typeInto("f", "Hi {{");
    await screen.findByRole("dialog", { name: "Insert a variable" });
    // The keyboard stays in the editor: there is no search box to steal it.
    expect(screen.queryByRole("searchbox", { name: "Search variables" })).toBeNull();
    typeInto("f", "tick");
    fireEvent.keyDown(document.getElementById("f")!, { key: "Enter" });
    await waitFor(() => expect(screen.getByTestId("text").textContent).toBe("Hi {{ ticket }}"));
  });

  it("lets a fluent {{ name }} type through the picker it opens", async () => {
    stubFetch({ "POST /api/v1/graphs/5/draft/preview/": () => ({ body: { ok: true, value: "x", type: "text", display: "x", truncated: false } }) });
    render(<Assisted language="template" />);
    typeInto("f", "Hi {{");
    await screen.findByRole("dialog", { name: "Insert a variable" });
    typeInto("f", " query }}");
    await waitFor(() => expect(screen.getByTestId("text").textContent).toBe("Hi {{ query }}"));
    expect(screen.queryByRole("dialog", { name: "Insert a variable" })).toBeNull();
  });

  it("offers no picker and no preview outside a node panel", () => {
    render(<CodeEditor id="g" value="x" onChange={() => {}} language="expression" check={false} ariaLabel="Cond" />);
    expect(screen.queryByRole("button", { name: /Insert a variable/ })).toBeNull();
  });
});
