import { act, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import type { RunDetail, RunEvent } from "../../api/types";
import { RunEventStream, type SocketLike } from "../../lib/liveEvents";
import { stubFetch } from "../../shell/testing";
import { runDetail, runStep } from "../../test/factories";
import { DraftRunResults } from "./DraftRunResults";
import { draftNeedsInput, draftRunBlocked } from "./draftRun";

afterEach(() => vi.unstubAllGlobals());

class FakeSocket implements SocketLike {
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: unknown) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  sent: unknown[] = [];
  send(data: string) { this.sent.push(JSON.parse(data)); }
  close() { /* the test ends it */ }
  push(e: Partial<RunEvent>) {
    this.onmessage?.({ data: JSON.stringify({ type: "event", event: { id: e.seq, step: null, kind: "step_succeeded", data: {}, created_at: "", ...e } }) });
  }
}

function fakeStream(): { stream: RunEventStream; socket: () => FakeSocket } {
  const sockets: FakeSocket[] = [];
  const stream = new RunEventStream({ url: "ws://test/ws/runs/", connect: () => { const s = new FakeSocket(); sockets.push(s); return s; } });
  return { stream, socket: () => sockets[sockets.length - 1]! };
}

const T = "2026-12-07T10:00:00Z";
const running: RunDetail = runDetail({
  id: 9, graph: 3, is_test: true, source: "draft", status: "running", created_at: T, started_at: T,
  steps: [
    runStep({ id: 1, run: 9, node_id: "start", kind: "start", status: "succeeded", started_at: T, finished_at: "2026-12-07T10:00:00.010Z" }),
    runStep({ id: 2, run: 9, node_id: "llm", kind: "llm", status: "running", started_at: T }),
  ],
});
const done: RunDetail = {
  ...running, status: "succeeded", finished_at: "2026-12-07T10:00:01Z", output: { reply: "Echo: hello" }, cost_usd: "0.000120",
  steps: [
    running.steps[0]!,
    { ...running.steps[1]!, status: "succeeded", finished_at: "2026-12-07T10:00:00.500Z", output: { reply: "Echo: hello" } },
    runStep({ id: 3, run: 9, node_id: "end", kind: "end", status: "succeeded", started_at: "2026-12-07T10:00:00.600Z", finished_at: "2026-12-07T10:00:00.610Z" }),
  ],
};

describe("DraftRunResults", () => {
  it("follows the run live: steps and their statuses, then the output once it succeeded", async () => {
    let current = running;
    const calls = stubFetch({ "GET /api/v1/runs/9/": () => ({ body: current }) });
    const { stream, socket } = fakeStream();
    const seen: string[] = [];
    render(<DraftRunResults runId={9} onClose={() => undefined} stream={stream} onRun={(r) => seen.push(r.status)} />);
    const region = await screen.findByRole("region", { name: "Draft run" });
    await within(region).findByText("llm");
    const steps = within(region).getByRole("list", { name: "Steps" });
    expect(within(steps).getAllByRole("button").map((b) => b.getAttribute("data-node"))).toEqual(["start", "llm"]);
    expect(within(region).getByText("Running…")).toBeTruthy();
    expect(within(region).queryByLabelText("Draft run output")).toBeNull();
    // The run follows the stream: a committed event makes the drawer read the run again.
    current = done;
    act(() => { socket().onopen?.({}); socket().push({ run: 9, seq: 1 }); });
    const output = await within(region).findByLabelText("Draft run output", {}, { timeout: 5000 });
    expect(output.textContent).toContain('"reply": "Echo: hello"');
    expect(within(steps).getAllByRole("button").map((b) => b.getAttribute("data-node"))).toEqual(["start", "llm", "end"]);
    expect(within(region).getByText(/\$0\.00012/)).toBeTruthy();
    expect(calls.filter((c) => c.path === "/api/v1/runs/9/").length).toBeGreaterThanOrEqual(2);
    expect(seen).toContain("succeeded");
    expect(within(region).getByRole("link", { name: "Open run page" }).getAttribute("href")).toBe("/runs/9/");
  });

  it("shows a failed run's error, selects a step's node when clicked and closes", async () => {
    const failed = { ...done, status: "failed" as const, output: null, error: { code: "expression", message: "division by zero", node_id: "llm" } };
    stubFetch({ "GET /api/v1/runs/9/": () => ({ body: failed }) });
    const selected: string[] = [];
    const onClose = vi.fn();
    render(<DraftRunResults runId={9} onClose={onClose} onSelectNode={(id) => selected.push(id)} stream={fakeStream().stream} />);
    expect((await screen.findByRole("alert")).textContent).toContain("division by zero");
    fireEvent.click(screen.getByRole("button", { name: /^llm/ }));
    expect(selected).toEqual(["llm"]);
    fireEvent.click(screen.getByRole("button", { name: "Close the draft run" }));
    await waitFor(() => expect(onClose).toHaveBeenCalledTimes(1));
  });
});

describe("draft run helpers", () => {
  it("asks for input only when the input schema names fields", () => {
    expect(draftNeedsInput({})).toBe(false);
    expect(draftNeedsInput({ input_schema: { type: "object" } })).toBe(false);
    expect(draftNeedsInput({ input_schema: { type: "object", properties: {} } })).toBe(false);
    expect(draftNeedsInput({ input_schema: { type: "object", properties: { topic: { type: "string" } } } })).toBe(true);
  });

  it("blocks a draft with problems, and while it is being checked", () => {
    expect(draftRunBlocked(null)).toBe("Checking the graph…");
    expect(draftRunBlocked(2)).toBe("Fix 2 problems before running the draft");
    expect(draftRunBlocked(0)).toBeNull();
  });
});
