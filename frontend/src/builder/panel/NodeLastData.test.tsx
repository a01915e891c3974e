import { act, render, screen, waitFor } from "@testing-library/react";
import { stubFetch } from "../../shell/testing";
import { runDetail, runStep } from "../../test/factories";
import { clearNodeData, recordDraftRun, recordNodeData } from "../run/lastData";
import { NodeLastData } from "./NodeLastData";

afterEach(() => { vi.unstubAllGlobals(); act(() => clearNodeData()); });

describe("NodeLastData", () => {
  it("shows nothing for a node that has not run from the builder", () => {
    const { container } = render(<NodeLastData graphId={3} nodeId="llm" />);
    expect(container.textContent).toBe("");
  });

  it("shows a node test's input and output, and follows a later test", async () => {
    render(<NodeLastData graphId={3} nodeId="llm" />);
    act(() => recordNodeData(3, "llm", { source: "test", runId: 40, stepId: null, status: "succeeded", input: { topic: "AI" }, output: { reply: "Echo: AI" } }));
    expect(screen.getByRole("region", { name: "Last run of this node" }).textContent).toContain("Node test #40");
    expect(screen.getByLabelText("Last input").textContent).toContain('"topic": "AI"');
    expect(screen.getByLabelText("Last output").textContent).toContain('"reply": "Echo: AI"');
    act(() => recordNodeData(3, "llm", { source: "test", runId: 41, stepId: null, status: "failed", input: {}, output: { message: "boom" } }));
    expect(screen.getByRole("heading", { name: "Error" })).toBeTruthy();
    expect(screen.getByRole("link", { name: "#41" }).getAttribute("href")).toBe("/runs/41/");
  });

  it("takes a draft run's finished steps, reads the step's input from the API, and keeps graphs apart", async () => {
    const calls = stubFetch({ "GET /api/v1/steps/8/state/": () => ({ body: { step: 8, input_state: { input: {}, greeting: "hi" } } }) });
    render(<><NodeLastData graphId={3} nodeId="llm" /><NodeLastData graphId={4} nodeId="llm" /></>);
    const run = runDetail({ id: 9, steps: [
      runStep({ id: 7, node_id: "start", status: "succeeded", output: {} }),
      runStep({ id: 8, node_id: "llm", status: "succeeded", output: { reply: "Echo: hi" } }),
      runStep({ id: 10, node_id: "end", status: "running" }),
    ] });
    act(() => recordDraftRun(3, run));
    expect(screen.getAllByRole("region")).toHaveLength(1);
    expect(screen.getByText(/Draft run/).textContent).toContain("Draft run #9");
    expect(screen.getByLabelText("Last output").textContent).toContain("Echo: hi");
    await waitFor(() => expect(screen.getByLabelText("Last input").textContent).toContain('"greeting": "hi"'));
    // The same run read again changes nothing and fetches nothing more.
    act(() => recordDraftRun(3, run));
    expect(calls.filter((c) => c.path === "/api/v1/steps/8/state/")).toHaveLength(1);
  });
});
