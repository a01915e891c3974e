// The delete dialog says up front when a graph cannot be deleted (it has runs) and offers no delete button then.
import { screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { DeleteDialog, deletedWhat } from "./GraphDialogs";
import { makeContext, renderWith } from "./testing";
import type { GraphSummary } from "../api/types";
import { graphSummary } from "../test/factories";

afterEach(() => vi.unstubAllGlobals());

const GRAPH: GraphSummary = graphSummary({ id: 3, name: "triage", latest_version: 2, created_by: "ada" });

describe("DeleteDialog", () => {
  it("says a graph with runs cannot be deleted before anyone confirms, and sends nothing", async () => {
    const fetch = vi.fn();
    vi.stubGlobal("fetch", fetch);
    const onClose = vi.fn();
    renderWith(<DeleteDialog graph={{ ...GRAPH, run_count: 2, deletable: false }} onClose={onClose} onDone={() => undefined} />, makeContext({ build: true }));
    expect(screen.getByRole("dialog", { name: "“triage” cannot be deleted" })).toBeTruthy();
    expect(screen.getByText(/It has 2 runs/)).toBeTruthy();
    expect(screen.queryByRole("button", { name: /delete/i })).toBeNull();
    await userEvent.setup().click(screen.getByRole("button", { name: "Close" }));
    expect(onClose).toHaveBeenCalled();
    expect(fetch).not.toHaveBeenCalled();
  });

  it("offers the destructive button for a graph without runs", () => {
    renderWith(<DeleteDialog graph={{ ...GRAPH, run_count: 0, deletable: true }} onClose={() => undefined} onDone={() => undefined} />, makeContext({ build: true }));
    expect(screen.getByRole("button", { name: "Delete graph" })).toBeTruthy();
    expect(screen.getByText(/2 published version/)).toBeTruthy();
  });
});

describe("deletedWhat", () => {
  it("counts the versions in words, with no 'all 0' or '(s)'", () => {
    expect(deletedWhat(0)).toBe("The graph and its draft are deleted (it was never published).");
    expect(deletedWhat(1)).toBe("The graph, its draft and its published version are deleted.");
    expect(deletedWhat(4)).toBe("The graph, its draft and all 4 published versions are deleted.");
  });
});
