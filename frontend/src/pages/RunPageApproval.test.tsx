import { fireEvent, screen, within } from "@testing-library/react";
import { makeContext, renderWith, stubFetch } from "../shell/testing";
import type { RunApproval, RunDetail } from "../api/types";
import { runDetail, runStep } from "../test/factories";
import { attemptShownStatus, createdShown } from "../runs/StepInspector";
import RunPage from "./RunPage";

afterEach(() => vi.unstubAllGlobals());
vi.setConfig({ testTimeout: 30_000 });
const slow = { timeout: 15_000 };

// A run waiting at its approval gate "approve" (step 2), as the refund example leaves one.
const run: RunDetail = runDetail({
  id: 9, graph: 2, graph_name: "Refund agent", version: 1, status: "waiting", waiting_for: "approval", event_seq: 30,
  created_at: "2026-12-07T14:42:41.898Z", started_at: "2026-12-07T14:42:41.898Z", finished_at: null,
  steps: [
    runStep({ id: 1, run: 9, node_id: "start", kind: "start", status: "succeeded", attempt: 1, started_at: "2026-12-07T14:42:41.900Z", finished_at: "2026-12-07T14:42:41.950Z" }),
    runStep({ id: 2, run: 9, node_id: "approve", kind: "approval", status: "waiting", attempt: 1, started_at: "2026-12-07T14:42:42.234Z", finished_at: null }),
  ],
});
const approveDetail = {
  ...run.steps[1], lease_owner: "", lease_expires_at: null, worker_alive: null, input: {}, updates: null, usage: null,
  // Created and leased in one commit: the row's created_at is stamped after the commit read its clock.
  created_at: "2026-12-07T14:42:42.310Z", idempotency_key: "k:approve:0", child_key: "", depth: 1, available_at: null, due_at: null,
  dispatched_at: null, state_seq: null, price_version: "", children: [], output: { prompt: "Refund?" },
  attempts: [{ number: 1, worker: "vm:1:a", build: "", status: "succeeded", error: null, usage: null, cost_usd: null, started_at: "2026-12-07T14:42:42.234Z", finished_at: "2026-12-07T14:42:42.300Z", retry_at: null }],
};
const request = (over: Partial<RunApproval> = {}): RunApproval => ({ id: 41, step: 2, node_id: "approve", purpose: "gate", created_at: "2026-12-07T14:42:42.310Z", may_decide: true, ...over });
const routes = (approvals: RunApproval[]) => ({
  "GET /api/v1/runs/9/": () => ({ body: run }),
  "GET /api/v1/runs/9/graph/": () => ({ body: { graph: 2, version: 1, is_test: false, spec: { name: "r", nodes: [], edges: [] } } }),
  "GET /api/v1/node-kinds/": () => ({ body: { kinds: [] } }),
  "GET /api/v1/approvals/of-run/9/": () => ({ body: approvals }),
  "GET /api/v1/steps/2/": () => ({ body: approveDetail }),
  "GET /api/v1/steps/2/state/": () => ({ body: { step: 2, seq: null, previous_step: null, input_state: {}, state: null, changed: {} } }),
});

describe("RunPage waiting at an approval", () => {
  it("links the waiting step to its request: Decide… on the page and in the step's inspector", async () => {
    stubFetch(routes([request()]));
    renderWith(<RunPage runId={9} />, makeContext({}, "run"));
    const notice = await screen.findByRole("status", { name: "Waiting at approval" }, slow);
    const link = within(notice).getByRole("link", { name: /^Decide…/ });
    expect(link.getAttribute("href")).toBe("/approvals/41/");
    expect(notice.textContent).toContain("approve");
    fireEvent.click(screen.getByRole("button", { name: "Inspect step approve" }));
    const inspector = await screen.findByRole("complementary", { name: "Step inspector" }, slow);
    expect((await within(inspector).findByRole("link", { name: /^Decide…/ }, slow)).getAttribute("href")).toBe("/approvals/41/");
    // The attempt ran to its end and asked for the decision: it waits with the step, not "Succeeded".
    const attempts = await within(inspector).findByRole("table", { name: "Attempts" }, slow);
    expect(within(attempts).getAllByRole("row")[1]!.textContent).toContain("waiting");
    expect(within(attempts).getAllByRole("row")[1]!.textContent).not.toContain("succeeded");
    // Created is never shown after Started.
    expect(inspector.textContent).toContain("with its start, in one commit");
  });

  it("offers a reader who may not decide the request's page, not Decide…", async () => {
    stubFetch(routes([request({ may_decide: false })]));
    renderWith(<RunPage runId={9} />, makeContext({}, "run"));
    const notice = await screen.findByRole("status", { name: "Waiting at approval" }, slow);
    expect(within(notice).getByRole("link", { name: /^Open approval request/ }).getAttribute("href")).toBe("/approvals/41/");
    expect(within(notice).queryByRole("link", { name: /^Decide…/ })).toBeNull();
  });
});

describe("step display helpers", () => {
  it("shows the last attempt of a waiting step as waiting, and every other as stored", () => {
    expect(attemptShownStatus({ number: 1, status: "succeeded" }, { status: "waiting", attempt: 1 })).toBe("waiting");
    expect(attemptShownStatus({ number: 1, status: "succeeded" }, { status: "succeeded", attempt: 1 })).toBe("succeeded");
    expect(attemptShownStatus({ number: 1, status: "failed" }, { status: "waiting", attempt: 2 })).toBe("failed");
  });

  it("never shows a step created after it started", () => {
    expect(createdShown({ created_at: "2026-12-07T14:42:42.310Z", started_at: "2026-12-07T14:42:42.234Z" })).toEqual({ at: "2026-12-07T14:42:42.234Z", sameCommit: true });
    expect(createdShown({ created_at: "2026-12-07T14:42:42.000Z", started_at: "2026-12-07T14:42:42.234Z" })).toEqual({ at: "2026-12-07T14:42:42.000Z", sameCommit: false });
    expect(createdShown({ created_at: "2026-12-07T14:42:42.000Z", started_at: null })).toEqual({ at: "2026-12-07T14:42:42.000Z", sameCommit: false });
  });
});
