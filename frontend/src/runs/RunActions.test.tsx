import type { ActionPreview, RunActionsAllowed, RunDetail, StepStatus } from "../api/types";
import { fireEvent, screen, waitFor, within } from "@testing-library/react";
import { makeContext, renderWith, stubFetch } from "../shell/testing";
import { runDetail, runStep } from "../test/factories";
import { forkableSteps } from "./ForkDialog";
import { RunActions, visibleActions } from "./RunActions";

afterEach(() => vi.unstubAllGlobals());

const step = (id: number, node_id: string, status: StepStatus) => runStep({
  id, run: 5, node_id, status, attempt: 1, max_attempts: 3, output: {}, started_at: "2026-12-01T10:00:00Z", finished_at: "2026-12-01T10:00:01Z",
});

const run: RunDetail = runDetail({
  id: 5, graph: 2, graph_name: "divide", version: 3, status: "failed", error: { message: "division by zero", node_id: "boom" },
  step_count: 3, created_by: "olu", created_at: "2026-12-01T10:00:00Z",
  started_at: "2026-12-01T10:00:00Z", finished_at: "2026-12-01T10:00:02Z", input: { x: 1 },
  steps: [step(1, "start", "succeeded"), step(2, "draft", "succeeded"), step(3, "boom", "failed")],
});

const allow = (over: Partial<Record<"cancel" | "resume" | "retry" | "fork", boolean>>, may = true): RunActionsAllowed => {
  const one = (ok: boolean) => ({ allowed: ok, reason: ok ? "" : "no" });
  return { may_act: may, status: "failed", cancel: one(!!over.cancel), resume: one(!!over.resume), retry: one(!!over.retry), fork: one(!!over.fork) };
};

const retryPreview: ActionPreview = {
  action: "retry", run: 5, mode: "failed", kept_cost_usd: "0.0012",
  kept: [{ step: 1, node_id: "start", iteration: 0, parent: null, cost_usd: null }, { step: 2, node_id: "draft", iteration: 0, parent: null, cost_usd: "0.0012" }],
  run_again: [{ step: 3, node_id: "boom", iteration: 0, parent: null, status: "pending", max_attempts: 4, estimate: { usd: "0", tokens: 0 } }],
  then: [{ node_id: "ask", estimate: { usd: "0.0003", tokens: 120 } }, { node_id: "end", estimate: { usd: "0", tokens: 0 } }],
  estimate: { usd: "0.0003", tokens: 120, unpriced: [] },
};

describe("visibleActions", () => {
  it("shows only allowed actions, and Retry rather than Resume on a failed run", () => {
    expect(visibleActions(allow({ retry: true, resume: true, fork: true }))).toEqual(["retry", "fork"]);
    expect(visibleActions(allow({}, false))).toEqual([]);
    expect(visibleActions({ ...allow({ resume: true, cancel: true }), status: "waiting" })).toEqual(["resume", "cancel"]);
    expect(visibleActions(null)).toEqual([]);
  });
  it("forks only from committed top-level steps", () => {
    expect(forkableSteps(run).map((s) => s.node_id)).toEqual(["start", "draft"]);
  });
});

describe("RunActions", () => {
  it("hides every action button from a user who may not act", async () => {
    const calls = stubFetch({ "GET /api/v1/runs/5/actions/": () => ({ body: allow({}, false) }) });
    renderWith(<RunActions run={run} />, makeContext({ operate: false }, "run"));
    await waitFor(() => expect(calls.length).toBe(1));
    expect(screen.queryByRole("button", { name: /Retry|Resume|Fork|Cancel/ })).toBeNull();
    expect(screen.getByRole("button", { name: "Compare…" })).toBeTruthy();
  });

  it("retries only after the preview, from its confirm button", async () => {
    const changed = vi.fn();
    const calls = stubFetch({
      "GET /api/v1/runs/5/actions/": () => ({ body: allow({ retry: true, fork: true }) }),
      "POST /api/v1/runs/5/retry/preview/": () => ({ body: retryPreview }),
      "POST /api/v1/runs/5/retry/": () => ({ body: { ...run, status: "running" } }),
    });
    renderWith(<RunActions run={run} onChanged={changed} />, makeContext({ operate: true }, "run"));
    fireEvent.click(await screen.findByRole("button", { name: "Retry from failed step" }));
    const dialog = await screen.findByRole("dialog", { name: /Retry run #5/ });
    const kept = await within(dialog).findByRole("list", { name: "Kept steps" });
    expect(kept.textContent).toContain("start");
    expect(kept.textContent).toContain("draft");
    const again = within(dialog).getByRole("list", { name: "Steps that run" });
    expect(again.textContent).toContain("boom");
    expect(again.textContent).toContain("4 attempts");
    expect(again.textContent).toContain("ask");
    expect(within(dialog).getByLabelText("Estimated cost").textContent).toContain("up to $0.0003 · 120 tokens");
    expect(calls.some((c) => c.path === "/api/v1/runs/5/retry/")).toBe(false);
    fireEvent.click(within(dialog).getByRole("button", { name: "Retry" }));
    await waitFor(() => expect(changed).toHaveBeenCalled());
    expect(calls.filter((c) => c.path === "/api/v1/runs/5/retry/" && c.method === "POST")).toHaveLength(1);
  });

  it("makes Retry the primary action for a passing error, a secondary one with the reason for a deterministic one", async () => {
    stubFetch({ "GET /api/v1/runs/5/actions/": () => ({ body: allow({ retry: true, fork: true }) }) });
    const passing = { ...run, error: { code: "timeout", message: "no answer", retryable: true, node_id: "boom" } };
    const { unmount } = renderWith(<RunActions run={passing} />, makeContext({ operate: true }, "run"));
    const primary = await screen.findByRole("button", { name: "Retry from failed step" });
    expect(primary.className).toContain("btn-primary");
    unmount();
    const deterministic = { ...run, error: { code: "expression", message: "division by zero", retryable: false, node_id: "boom" } };
    renderWith(<RunActions run={deterministic} />, makeContext({ operate: true }, "run"));
    const secondary = await screen.findByRole("button", { name: "Retry from failed step" });
    expect(secondary.className).not.toContain("btn-primary");
    expect(secondary.getAttribute("title")).toContain("will most likely fail again");
  });

  it("shows the server's refusal of a preview instead of a confirm that would fail", async () => {
    stubFetch({
      "GET /api/v1/runs/5/actions/": () => ({ body: allow({ retry: true }) }),
      "POST /api/v1/runs/5/retry/preview/": () => ({ status: 409, body: { error: { code: "invalid_state", message: "run 5 is running; only a failed run can be retried" } } }),
    });
    renderWith(<RunActions run={run} />, makeContext({ operate: true }, "run"));
    fireEvent.click(await screen.findByRole("button", { name: "Retry from failed step" }));
    const dialog = await screen.findByRole("dialog");
    expect((await within(dialog).findByRole("alert")).textContent).toContain("only a failed run can be retried");
    expect((within(dialog).getByRole("button", { name: "Retry" }) as HTMLButtonElement).disabled).toBe(true);
  });

  it("opens the fork dialog on the last committed step with its state, keys and preview", async () => {
    const forkPreview: ActionPreview = {
      ...retryPreview, action: "fork", mode: undefined, run_again: [{ ...retryPreview.run_again[0]!, step: null }],
      anchor: { step: 2, node_id: "draft", iteration: 0 }, state: { greeting: "Hi", x: 1, input: { x: 1 } },
      state_keys: ["greeting", "x", "zero"], patched: [], dropped: [{ step: 3, node_id: "boom", iteration: 0 }],
    };
    const calls = stubFetch({
      "GET /api/v1/runs/5/actions/": () => ({ body: allow({ fork: true }) }),
      "POST /api/v1/runs/5/fork/preview/": () => ({ body: forkPreview }),
    });
    renderWith(<RunActions run={run} />, makeContext({ operate: true }, "run"));
    fireEvent.click(await screen.findByRole("button", { name: "Fork…" }));
    const dialog = await screen.findByRole("dialog", { name: "Fork run #5" });
    expect((within(dialog).getByLabelText("Fork after step") as HTMLSelectElement).value).toBe("2");
    await within(dialog).findByRole("list", { name: "Kept steps" });
    expect(calls.find((c) => c.path.endsWith("/fork/preview/"))?.body).toEqual({ step: 2, state_patch: {} });
    expect(dialog.textContent).toContain("Not carried over from run #5: boom");
    expect(dialog.textContent).toContain("zero");
    expect(within(dialog).getByRole("button", { name: "Fork" })).toBeTruthy();
  });
});
