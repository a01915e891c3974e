// A node's own settings only where its kind uses them (from the node-kind catalogue), and one "as the kind says" choice.
import { screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SidePanel } from "./SidePanel";
import { renderInBuilder, sampleSpec, scriptFetch } from "./testing";

vi.setConfig({ testTimeout: 30_000 });
afterEach(() => vi.unstubAllGlobals());

const okCheck = () => scriptFetch(() => [200, { ok: true, errors: [], tools: [], providers: [] }]);
const shown = (id: string) => document.getElementById(id) !== null;

describe("node settings by kind", () => {
  it("a start node offers no timeout, retry, max iterations or test run", () => {
    okCheck();
    renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["start"] } });
    expect(shown("node.label")).toBe(true);
    expect(shown("node.timeout_seconds")).toBe(false);
    expect(shown("node.max_iterations")).toBe(false);
    expect(shown("node.repeat_safe")).toBe(false);
    expect(screen.queryByText("Retry")).toBeNull();
    expect(screen.queryByRole("button", { name: "Test node" })).toBeNull();
    expect(screen.queryByRole("heading", { name: "Policies" })).toBeNull();
  });

  it("a join can be on a loop: max iterations, but no timeout or test run", () => {
    okCheck();
    const spec = sampleSpec();
    spec.nodes.push({ id: "merge", kind: "join", config: {} });
    renderInBuilder(<SidePanel />, { spec, selection: { nodes: ["merge"] } });
    expect(shown("node.max_iterations")).toBe(true);
    expect(shown("node.timeout_seconds")).toBe(false);
    expect(screen.queryByRole("button", { name: "Test node" })).toBeNull();
  });

  it("a timeout already set on a start node stays visible, so it can be cleared", () => {
    okCheck();
    const spec = sampleSpec();
    spec.nodes[0] = { id: "start", kind: "start", config: {}, timeout_seconds: 5 };
    renderInBuilder(<SidePanel />, { spec, selection: { nodes: ["start"] } });
    expect(shown("node.timeout_seconds")).toBe(true);
  });

  it("a tool node keeps everything, and Safe to repeat has three options, none blank", () => {
    okCheck();
    renderInBuilder(<SidePanel />, { spec: sampleSpec(), selection: { nodes: ["mail"] } });
    expect(shown("node.timeout_seconds")).toBe(true);
    expect(shown("node.max_iterations")).toBe(true);
    expect(screen.getByRole("button", { name: "Test node" })).toBeTruthy();
    const select = document.getElementById("node.repeat_safe") as HTMLSelectElement;
    expect(within(select).getAllByRole("option").map((o) => o.textContent)).toEqual([
      "As the kind says",
      "Yes: run it again after a crash",
      "No: park the run for a person after a crash",
    ]);
  });
});
