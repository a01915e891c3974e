// Test data pinned per node: pin the last input, edit, unpin; the store the canvas and Test node read follows.
import { act, render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { stubFetch } from "../../shell/testing";
import { clearNodeData, recordNodeData } from "../run/lastData";
import { seedPins } from "../run/pins";
import { NodePin } from "./NodePin";
import { useTestData } from "./useTestData";

vi.setConfig({ testTimeout: 30_000 });
afterEach(() => { vi.unstubAllGlobals(); act(() => { clearNodeData(); seedPins(0, {}); }); });

function Pin() {
  const data = useTestData(3, "ask");
  return <NodePin graphId={3} nodeId="ask" data={data} blank={{ ticket: null }} />;
}

describe("NodePin", () => {
  it("pins the last test input, shows it pinned, and unpins", async () => {
    const calls = stubFetch({
      "PUT /api/v1/graphs/3/draft/pins/ask/": (c) => ({ body: { pins: { ask: (c.body as { data: unknown }).data } } }),
      "DELETE /api/v1/graphs/3/draft/pins/ask/": () => ({ body: { pins: {} } }),
    });
    act(() => { seedPins(3, {}); recordNodeData(3, "ask", { source: "test", runId: 1, stepId: null, status: "succeeded", input: { ticket: "T-9" }, output: {} }); });
    render(<Pin />);
    expect(screen.getByText("From the last test input")).toBeTruthy();
    await userEvent.click(screen.getByRole("button", { name: /Pin last test input/ }));
    await waitFor(() => expect(screen.getByLabelText("Pinned data").textContent).toContain('"ticket": "T-9"'));
    expect(calls[0]!.body).toEqual({ data: { ticket: "T-9" } });
    expect(screen.getByText("Pinned: kept with the draft")).toBeTruthy();
    await userEvent.click(screen.getByRole("button", { name: "Unpin" }));
    await waitFor(() => expect(screen.queryByLabelText("Pinned data")).toBeNull());
  });

  it("shows the server's field error for data it refuses", async () => {
    stubFetch({ "PUT /api/v1/graphs/3/draft/pins/ask/": () => ({ status: 400, body: { error: { code: "pin_invalid", message: "bad", fields: { data: ["Pinned data may be at most 256 KB of JSON."] } } } }) });
    act(() => seedPins(3, { ask: { ticket: "x" } }));
    render(<Pin />);
    await userEvent.click(screen.getByRole("button", { name: "Edit" }));
    await userEvent.click(screen.getByRole("button", { name: "Save pin" }));
    await waitFor(() => expect(screen.getByRole("alert").textContent).toContain("256 KB"));
  });
});
