import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { ApiError } from "../lib/api";
import { makeContext, page, renderWith, stubFetch } from "../shell/testing";
import type { Approval } from "../api/types";
import Approvals from "./Approvals";
import { changeNote, conflictMessage, deadlineState, formatCountdown, listPath } from "./inbox";

afterEach(() => vi.unstubAllGlobals());

const approval = (id: number, extra: Partial<Approval> = {}): Approval => ({
  id, run: 40 + id, step: 1, graph: 3, graph_name: `Refund ${id}`, node_id: "approve", purpose: "gate", status: "pending",
  prompt: `Refund order ${id}?`, payload: {}, approvers: [], approver_groups: ["approvers"], decision: "", comment: "", decided_by: "",
  created_at: "2026-12-01T10:00:00Z", decided_at: null, may_decide: true, version: "1:abc", last_change: "", claimed_by: "",
  claimed_at: null, quorum: 1, votes: [], reason: "", values: null, run_status: "waiting", started_by: "olu", cost_usd: "0.0012",
  budget_usd: "0.25", next_actions: [{ node_id: "issue", kind: "tool", label: "Issue refund", arguments: { tool: "issue_refund", args: { order_id: "A-1" } } }],
  state: { order_id: "A-1" }, reject_reasons: [], edit_schema: null, starter_counts: false,
  deadline: null, due_at: null, escalation: "", escalated_at: null, run_event_seq: 3, ...extra,
});

const counts = { assigned: 0, group: 2, decided: 0, waiting: 2 };

describe("Approvals inbox", () => {
  it("opens the group list when nothing is assigned, shows what approving does, and decides with the version shown", async () => {
    const user = userEvent.setup();
    const calls = stubFetch({
      "GET /api/v1/approvals/inbox/": () => ({ body: page([approval(2), approval(1)]) }),
      "GET /api/v1/approvals/inbox/counts/": () => ({ body: counts }),
      "GET /api/v1/approvals/2/": () => ({ body: approval(2) }),
      "POST /api/v1/approvals/2/decide/": () => ({ body: approval(2, { status: "approved", decision: "approve", decided_by: "ada", decided_at: "2026-12-01T10:05:00Z", version: "2:abc" }) }),
    });
    renderWith(<Approvals />, makeContext({ approve: true }, "approvals"));
    expect(await screen.findByText("Refund 2", { selector: ".inbox-item-graph" })).toBeTruthy();
    expect(screen.getByRole("tab", { name: /My groups/ }).getAttribute("aria-selected")).toBe("true");
    expect(await screen.findByText("issue_refund")).toBeTruthy();
    expect(screen.getByText("A-1", { selector: "dd span" })).toBeTruthy();
    expect(screen.getByText("$0.0012 of $0.25 budget")).toBeTruthy();
    await user.type(screen.getByLabelText("Comment"), "ok");
    await user.click(screen.getByRole("button", { name: "Approve" }));
    await screen.findByText("Approved. The run continues on its own.");
    const post = calls.find((c) => c.method === "POST")!;
    expect(post.body).toEqual({ decision: "approve", comment: "ok", version: "1:abc" });
    expect(post.headers["X-CSRFToken"]).toBeDefined();
  });

  it("says who decided when a decision lost the race, and needs a reason where the node declares them", async () => {
    const user = userEvent.setup();
    stubFetch({
      "GET /api/v1/approvals/inbox/": () => ({ body: page([approval(2, { reject_reasons: ["tone", "facts"] })]) }),
      "GET /api/v1/approvals/inbox/counts/": () => ({ body: { ...counts, group: 1 } }),
      "GET /api/v1/approvals/2/": () => ({ body: approval(2, { reject_reasons: ["tone", "facts"] }) }),
      "POST /api/v1/approvals/2/decide/": () => ({
        status: 409, body: { error: { code: "already_decided", message: "approval 2 was already approved by bea", fields: {}, decided_by: "bea", status: "approved" } },
      }),
    });
    renderWith(<Approvals />, makeContext({ approve: true }, "approvals"));
    const reject = await screen.findByRole("button", { name: "Reject" }, { timeout: 15_000 });
    expect((reject as HTMLButtonElement).disabled).toBe(true);
    await user.selectOptions(screen.getByLabelText("Reason, if you reject"), "tone");
    expect((reject as HTMLButtonElement).disabled).toBe(false);
    await user.click(reject);
    expect((await screen.findByRole("alert")).textContent).toContain("Not recorded: bea already approved this request.");
  });

  it("shows an empty state per list and the search in the API path", async () => {
    const calls = stubFetch({
      "GET /api/v1/approvals/inbox/": () => ({ body: page([]) }),
      "GET /api/v1/approvals/inbox/counts/": () => ({ body: { assigned: 0, group: 0, decided: 0, waiting: 0 } }),
    });
    renderWith(<Approvals />, makeContext({ approve: true }, "approvals"));
    expect(await screen.findByText("Nothing is assigned to you")).toBeTruthy();
    await userEvent.setup().type(screen.getByLabelText("Search approvals"), "A-1");
    await waitFor(() => expect(calls.some((c) => c.path.includes("q=A-1"))).toBe(true));
    expect(listPath("group", " x ")).toBe("approvals/inbox/?list=group&page_size=50&q=x");
  });

  it("reloads, and does not hang on 'Loading requests…', when the selected tab is clicked again", async () => {
    const user = userEvent.setup();
    const calls = stubFetch({
      "GET /api/v1/approvals/inbox/": () => ({ body: page([approval(2)]) }),
      "GET /api/v1/approvals/inbox/counts/": () => ({ body: { ...counts, group: 1 } }),
      "GET /api/v1/approvals/2/": () => ({ body: approval(2) }),
    });
    renderWith(<Approvals />, makeContext({ approve: true }, "approvals"));
    expect(await screen.findByText("Refund 2", { selector: ".inbox-item-graph" })).toBeTruthy();
    const lists = () => calls.filter((c) => c.path.startsWith("/api/v1/approvals/inbox/?")).length;
    const before = lists();
    await user.click(screen.getByRole("tab", { name: /My groups/ }));
    await waitFor(() => expect(lists()).toBeGreaterThan(before));
    expect(screen.getByText("Refund 2", { selector: ".inbox-item-graph" })).toBeTruthy();
    expect(screen.queryByText("Loading requests…")).toBeNull();
  });

  it("opens 'My groups' when a request arrives there while 'Assigned to me' is empty and no list was picked", async () => {
    let arrived = false;
    stubFetch({
      "GET /api/v1/approvals/inbox/": (c) => ({ body: page(arrived && c.path.includes("list=group") ? [approval(2)] : []) }),
      "GET /api/v1/approvals/inbox/counts/": () => {
        const body = arrived ? { ...counts, group: 1 } : { assigned: 0, group: 0, decided: 0, waiting: 0 };
        return { body };
      },
      "GET /api/v1/approvals/2/": () => ({ body: approval(2) }),
    });
    renderWith(<Approvals />, makeContext({ approve: true }, "approvals"));
    expect(await screen.findByText("Nothing is assigned to you")).toBeTruthy();
    arrived = true;
    // No live socket in jsdom: the inbox polls, and the next fetch sees the request.
    expect(await screen.findByText("Refund 2", { selector: ".inbox-item-graph" }, { timeout: 15_000 })).toBeTruthy();
    expect(screen.getByRole("tab", { name: /My groups/ }).getAttribute("aria-selected")).toBe("true");
  }, 20_000);
});

describe("Approvals inbox on a phone", () => {
  it("opens an approval link on the request, with the list behind 'All requests', and a tapped row back on its request", async () => {
    const user = userEvent.setup();
    stubFetch({
      "GET /api/v1/approvals/inbox/": () => ({ body: page([approval(2), approval(1)]) }),
      "GET /api/v1/approvals/inbox/counts/": () => ({ body: counts }),
      "GET /api/v1/approvals/1/": () => ({ body: approval(1) }),
      "GET /api/v1/approvals/2/": () => ({ body: approval(2) }),
    });
    const { container } = renderWith(<Approvals approvalId={1} />, makeContext({ approve: true }, "approvals"));
    const main = container.querySelector("main")!;
    // The link's request is what a phone shows (approvals.css hides the list below 900 px).
    expect(main.dataset.view).toBe("request");
    expect(await screen.findByRole("heading", { name: "Approval · Refund 1" })).toBeTruthy();
    await user.click(await screen.findByRole("button", { name: "← All requests (2)" }));
    expect(main.dataset.view).toBe("list");
    await user.click(screen.getByText("Refund 2", { selector: ".inbox-item-graph" }));
    expect(main.dataset.view).toBe("request");
    expect(window.location.pathname).toBe("/approvals/2/");
  });
});

describe("inbox helpers", () => {
  it("turns 409s into sentences naming who or what", () => {
    const err = (code: string, extra: Record<string, unknown> = {}) =>
      new ApiError(409, { error: { code, message: `m-${code}`, fields: {}, ...extra } }, "x");
    expect(conflictMessage(err("claimed", { by: "bea" }))).toContain("bea claimed this request");
    expect(conflictMessage(err("changed"))).toBe("Not recorded: m-changed");
    expect(conflictMessage(new ApiError(400, { error: { code: "bad", message: "bad input", fields: {} } }, "x"))).toBe("bad input");
  });

  it("notes what changed since the item was shown", () => {
    const shown = approval(1);
    expect(changeNote(shown, shown)).toBeNull();
    expect(changeNote(shown, approval(1, { version: "2:abc", last_change: "claimed by bea" }))).toBe("claimed by bea.");
    expect(changeNote(shown, approval(1, { version: "1:def" }))).toContain("what approving would do has changed");
    expect(changeNote(shown, approval(1, { status: "rejected", decided_by: "bea", version: "2:abc" }))).toBe("bea rejected it.");
    expect(changeNote(shown, approval(1, { status: "expired", decided_by: "deadline", deadline: "4h", version: "2:abc" }))).toBe("nobody decided within 4h: it timed out and the run took its timeout path.");
  });
});

describe("deadlines in the inbox", () => {
  const base = approval(9, { deadline: "1h", escalation: "timeout", created_at: "2026-12-01T10:00:00Z", due_at: "2026-12-01T11:00:00Z" });
  const at = (iso: string) => Date.parse(iso);

  it("counts down, turns amber near the end, says overdue until the engine fires it", () => {
    expect(formatCountdown(3 * 86400 + 5 * 3600)).toBe("3d 5h");
    expect(formatCountdown(3 * 3600 + 65)).toBe("3h 01m");
    expect(formatCountdown(249)).toBe("4m 09s");
    expect(formatCountdown(-3)).toBe("0s");
    expect(deadlineState(base, at("2026-12-01T10:10:00Z"))).toMatchObject({ tone: "due", label: "due in 50m 00s" });
    expect(deadlineState(base, at("2026-12-01T10:10:00Z"))!.detail).toContain("times out and the run takes its timeout path");
    expect(deadlineState(base, at("2026-12-01T10:57:00Z"))).toMatchObject({ tone: "soon", label: "due in 3m 00s" });
    expect(deadlineState(base, at("2026-12-01T11:00:01Z"))).toMatchObject({ tone: "overdue", label: "overdue" });
  });

  it("shows an escalation once it fired, a time-out as such, and nothing without a deadline", () => {
    expect(deadlineState({ ...base, escalation: "reassign", escalated_at: "2026-12-01T11:00:02Z" }, 0)).toMatchObject({ tone: "escalated", label: "escalated · reassigned" });
    expect(deadlineState({ ...base, escalation: "notify", escalated_at: "2026-12-01T11:00:02Z" }, 0)!.label).toBe("escalated · approvers reminded");
    expect(deadlineState({ ...base, status: "expired" }, 0)).toMatchObject({ tone: "expired", label: "timed out" });
    expect(deadlineState(approval(1), 0)).toBeNull();
  });

  it("shows the countdown on the row and the open item", async () => {
    const due = new Date(Date.now() + 90_000).toISOString();
    const item = approval(2, { deadline: "2m", escalation: "reassign", due_at: due, created_at: new Date(Date.now() - 30_000).toISOString() });
    stubFetch({
      "GET /api/v1/approvals/inbox/": () => ({ body: page([item]) }),
      "GET /api/v1/approvals/inbox/counts/": () => ({ body: { ...counts, group: 1 } }),
      "GET /api/v1/approvals/2/": () => ({ body: item }),
    });
    renderWith(<Approvals />, makeContext({ approve: true }, "approvals"));
    await waitFor(() => expect(screen.getAllByText(/^due in 1m \d\ds$/).length).toBe(2));
    expect(screen.getByText(/then it is reassigned/)).toBeTruthy();
  });
});
