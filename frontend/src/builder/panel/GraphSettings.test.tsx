// Graph settings: fields as undo steps, state keys added/edited/removed, the costliest path, read-only.
import { act, fireEvent, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SidePanel } from "./SidePanel";
import { renderInBuilder, sampleSpec, scriptFetch } from "./testing";
import * as factories from "../../test/factories";

vi.setConfig({ testTimeout: 30_000 });
afterEach(() => vi.unstubAllGlobals());

describe("graph settings (nothing selected)", () => {
  it("edits name and limits, each field one undo step", async () => {
    const user = userEvent.setup();
    const { harness } = renderInBuilder(<SidePanel />, { spec: sampleSpec() });
    const name = screen.getByLabelText("Name");
    await user.type(name, " v2");
    expect(harness.api().spec.name).toBe("Triage v2");
    await user.type(screen.getByLabelText("Max steps"), "50");
    expect(harness.api().spec.settings?.max_steps).toBe(50);
    await user.type(screen.getByLabelText("Budget (USD)"), "1.5");
    expect(harness.api().spec.settings?.budget_usd).toBe("1.5");
    expect([...new Set(harness.changeKeys)]).toEqual(["graph:name", "graph:settings.max_steps", "graph:settings.budget_usd"]);
    act(() => harness.api().undo());
    expect(harness.api().spec.settings?.budget_usd).toBeUndefined();
    act(() => harness.api().undo());
    act(() => harness.api().undo());
    expect(harness.api().spec.name).toBe("Triage");
    await user.clear(screen.getByLabelText("Max steps"));
  });

  it("adds, edits and removes state keys", async () => {
    const user = userEvent.setup();
    const { harness } = renderInBuilder(<SidePanel />, { spec: sampleSpec() });
    await user.click(screen.getByRole("button", { name: "Add state key" }));
    expect(harness.api().spec.state).toEqual({ notes: { reducer: "append", default: [] }, key: { reducer: "replace" } });
    const row = screen.getByRole("group", { name: "State key key" });
    const nameInput = within(row).getByLabelText("Key");
    await user.clear(nameInput);
    await user.type(nameInput, "9bad");
    fireEvent.blur(nameInput);
    expect(within(row).getByText(/not starting with a digit/)).toBeTruthy();
    await user.clear(nameInput);
    await user.type(nameInput, "total");
    fireEvent.blur(nameInput);
    const total = screen.getByRole("group", { name: "State key total" });
    // Short names in the select (it is narrow), what the chosen one does under it.
    const reducer = within(total).getByLabelText("Reducer");
    expect(within(reducer).getAllByRole("option").map((o) => o.textContent)).toEqual(["Replace", "Append", "Extend", "Add", "Merge", "Max", "Min"]);
    expect(within(total).getByText("The last write wins.")).toBeTruthy();
    await user.selectOptions(reducer, "add");
    expect(within(total).getByText("Writes are summed (numbers).").id).toBe(reducer.getAttribute("aria-describedby"));
    // A summing reducer: the default is a number input, not JSON.
    const def = within(total).getByLabelText("Default");
    expect((def as HTMLInputElement).type).toBe("number");
    await user.type(def, "0");
    expect(harness.api().spec.state?.total).toEqual({ reducer: "add", default: 0 });
    await user.click(within(total).getByRole("button", { name: "Remove state key total" }));
    expect(Object.keys(harness.api().spec.state ?? {})).toEqual(["notes"]);
  });

  it("shows the costliest path and selects its nodes", async () => {
    const user = userEvent.setup();
    const { harness } = renderInBuilder(<SidePanel />, {
      spec: sampleSpec(),
      validation: factories.validation({
        valid: true,
        errors: [],
        handles: {},
        estimate: factories.estimate({ ask: { usd: "0.012", tokens: 2000 } }, { nodes: ["start", "ask"], usd: "0.012", tokens: 2000 }),
      }),
    });
    expect(screen.getByText("$0.012 · 2,000 tokens", { selector: "strong" })).toBeTruthy();
    await user.click(screen.getByRole("button", { name: "Ask model" }));
    expect(harness.api().selection.nodes).toEqual(["ask"]);
  });

  it("read-only shows the settings without inputs", () => {
    scriptFetch(() => [200, {}]);
    renderInBuilder(<SidePanel />, { spec: sampleSpec(), readOnly: true });
    expect(screen.getByText("Triage")).toBeTruthy();
    expect(screen.getByText("append")).toBeTruthy();
    expect(document.querySelector("input, textarea, select, [contenteditable=true]")).toBeNull();
  });
});

describe("the run input as a list of fields", () => {
  it("shows the input schema's properties as fields and edits them into the same JSON Schema", async () => {
    const user = userEvent.setup();
    const { harness } = renderInBuilder(<SidePanel />, { spec: sampleSpec() });
    const fields = screen.getByRole("list", { name: "Input fields" });
    const ticket = within(fields).getByRole("listitem", { name: "Input field ticket" });
    expect((within(ticket).getByLabelText("Type") as HTMLSelectElement).value).toBe("string");
    const priority = within(fields).getByRole("listitem", { name: "Input field priority" });
    expect((within(priority).getByLabelText("Default") as HTMLInputElement).value).toBe("3");
    // No JSON editor unless asked for.
    expect(document.querySelector('[id="graph.input_schema"] .cm-editor')).toBeNull();

    await user.click(within(ticket).getByLabelText("Required"));
    await user.type(within(ticket).getByLabelText("Description"), "The customer's message");
    await user.type(within(ticket).getByLabelText("Allowed values"), "billing{Enter}bug");
    await user.selectOptions(within(ticket).getByLabelText("Default"), "bug");
    await user.click(screen.getByRole("button", { name: "Add input field" }));
    const added = within(fields).getByRole("listitem", { name: "Input field field" });
    const name = within(added).getByLabelText("Field name");
    await user.clear(name);
    await user.type(name, "urgent");
    fireEvent.blur(name);
    await user.selectOptions(within(screen.getByRole("listitem", { name: "Input field urgent" })).getByLabelText("Type"), "boolean");
    await user.selectOptions(within(screen.getByRole("listitem", { name: "Input field urgent" })).getByLabelText("Default"), "no");
    expect(harness.api().spec.input_schema).toEqual({
      type: "object",
      properties: {
        ticket: { type: "string", description: "The customer's message", enum: ["billing", "bug"], default: "bug" },
        priority: { type: "integer", default: 3 },
        urgent: { type: "boolean", default: false },
      },
      required: ["ticket"],
    });
  });

  it("opens a schema it cannot show as JSON, saying why", () => {
    const spec = sampleSpec();
    spec.input_schema = { type: "object", properties: { when: { anyOf: [{ type: "string" }, { type: "null" }] } } };
    renderInBuilder(<SidePanel />, { spec });
    expect(screen.getByText(/cannot show this schema/)).toBeTruthy();
    expect(screen.getByText("when: no type.")).toBeTruthy();
    expect(document.querySelector('[id="graph.input_schema"]')?.closest(".cm-editor")).toBeTruthy();
    expect(screen.queryByRole("list", { name: "Input fields" })).toBeNull();
  });

  it("Edit as JSON switches a readable schema to the JSON editor and back", async () => {
    const user = userEvent.setup();
    renderInBuilder(<SidePanel />, { spec: sampleSpec() });
    await user.click(screen.getByLabelText("Edit as JSON"));
    expect(document.querySelector('[id="graph.input_schema"]')?.closest(".cm-editor")).toBeTruthy();
    expect(screen.queryByRole("list", { name: "Input fields" })).toBeNull();
    await user.click(screen.getByLabelText("Edit as JSON"));
    expect(screen.getByRole("list", { name: "Input fields" })).toBeTruthy();
  });
});

describe("typing fast while the panel renders a late copy of the state", () => {
  it("keeps every keystroke in name, description and a state key's description", async () => {
    const user = userEvent.setup({ delay: null });
    const { harness } = renderInBuilder(<SidePanel />, { spec: sampleSpec(), lag: true });
    await user.type(document.getElementById("graph.description")!, "The quick brown fox");
    expect(harness.api().spec.description).toBe("Sort ticketsThe quick brown fox");
    await user.type(screen.getByLabelText("Name"), " jumps");
    expect(harness.api().spec.name).toBe("Triage jumps");
    const row = screen.getByRole("group", { name: "State key notes" });
    await user.type(within(row).getByLabelText("Description"), "over the lazy dog");
    expect(harness.api().spec.state?.notes?.description).toBe("over the lazy dog");
  });
});
