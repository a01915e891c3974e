// The graph settings' retention field: loaded from the graph, saved to it when left (PATCH retention_days), the server's refusal shown under the field, empty for the server's default, read-only without an input.
import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SidePanel } from "./SidePanel";
import { renderInBuilder, sampleSpec, scriptFetch, type FetchCall } from "./testing";

vi.setConfig({ testTimeout: 30_000 });
afterEach(() => vi.unstubAllGlobals());

/** A graph 7 whose retention_days the PATCH sets, refusing what the server's serializer refuses. */
function server(initial: number | null): FetchCall[] {
  let days = initial;
  return scriptFetch((call) => {
    if (call.url === "/api/v1/graphs/7/" && call.method === "GET") return [200, { id: 7, operators: [], operator_groups: [], retention_days: days }];
    if (call.url === "/api/v1/graphs/7/" && call.method === "PATCH") {
      const asked = (call.body as { retention_days: unknown }).retention_days;
      if (asked !== null && (typeof asked !== "number" || !Number.isInteger(asked) || asked < 1 || asked > 36500)) {
        const message = typeof asked === "number" && asked < 1 ? "Ensure this value is greater than or equal to 1." : "A valid integer is required.";
        return [400, { error: { code: "invalid", message: "Invalid input.", fields: { retention_days: [message] } } }];
      }
      days = asked as number | null;
      return [200, { id: 7, operators: [], operator_groups: [], retention_days: days }];
    }
    return [200, { ok: true, errors: [], tools: [], providers: [] }];
  });
}

const patches = (calls: FetchCall[]) => calls.filter((c) => c.method === "PATCH").map((c) => c.body);

describe("a graph's retention in its settings", () => {
  it("shows the graph's days, saves a change when the field is left, and empty for the server's default", async () => {
    const calls = server(30);
    const { harness } = renderInBuilder(<SidePanel />, { spec: sampleSpec() });
    const field = (await screen.findByLabelText("Keep finished runs (days)")) as HTMLInputElement;
    await waitFor(() => expect(field.value).toBe("30"));
    const user = userEvent.setup();
    await user.tab(); // leaving it unchanged saves nothing
    expect(patches(calls)).toEqual([]);
    await user.clear(field);
    await user.type(field, "90{Enter}");
    await waitFor(() => expect(patches(calls)).toEqual([{ retention_days: 90 }]));
    expect(await screen.findByText(/Saved: 90 days\./)).toBeTruthy();
    await user.clear(field);
    field.blur();
    await waitFor(() => expect(patches(calls)).toEqual([{ retention_days: 90 }, { retention_days: null }]));
    expect(await screen.findByText(/Saved: the server's default\./)).toBeTruthy();
    // The graph's, not the draft's: no undo step.
    expect(harness.changeKeys).toEqual([]);
  });

  it("shows the server's refusal under the field and keeps what was typed", async () => {
    const calls = server(null);
    renderInBuilder(<SidePanel />, { spec: sampleSpec() });
    const field = (await screen.findByLabelText("Keep finished runs (days)")) as HTMLInputElement;
    expect(field.placeholder).toBe("server default");
    const user = userEvent.setup();
    await user.type(field, "0{Enter}");
    const alert = await screen.findByText("Ensure this value is greater than or equal to 1.");
    expect(alert.closest(".form-field")?.querySelector("input")).toBe(field);
    expect(field.getAttribute("aria-invalid")).toBe("true");
    expect(field.value).toBe("0");
    await user.clear(field);
    await user.type(field, "7{Enter}");
    await waitFor(() => expect(patches(calls)).toEqual([{ retention_days: 0 }, { retention_days: 7 }]));
    await waitFor(() => expect(screen.queryByText("Ensure this value is greater than or equal to 1.")).toBeNull());
    expect(field.getAttribute("aria-invalid")).toBeNull();
  });

  it("read-only shows the days without an input", async () => {
    server(14);
    renderInBuilder(<SidePanel />, { spec: sampleSpec(), readOnly: true });
    expect(await screen.findByText("14 days")).toBeTruthy();
    expect(document.getElementById("graph.retention_days")?.tagName).toBe("P");
  });
});
