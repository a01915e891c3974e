// Graph settings: fields as undo steps, state keys added/edited/removed, the costliest path, read-only.
import { act, fireEvent, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SidePanel } from "./SidePanel";
import { renderInBuilder, sampleSpec, scriptFetch } from "./testing";

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
    await user.selectOptions(within(total).getByLabelText("Reducer"), "add");
    const def = within(total).getByLabelText("Default (JSON)");
    await user.type(def, "0");
    fireEvent.blur(def);
    expect(harness.api().spec.state?.total).toEqual({ reducer: "add", default: 0 });
    await user.click(within(total).getByRole("button", { name: "Remove state key total" }));
    expect(Object.keys(harness.api().spec.state ?? {})).toEqual(["notes"]);
  });

  it("shows the costliest path and selects its nodes", async () => {
    const user = userEvent.setup();
    const { harness } = renderInBuilder(<SidePanel />, {
      spec: sampleSpec(),
      validation: {
        valid: true,
        errors: [],
        handles: {},
        estimate: { nodes: { ask: { usd: "0.012", tokens: 2000 } }, costliest_path: { nodes: ["start", "ask"], usd: "0.012", tokens: 2000 } },
      },
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
