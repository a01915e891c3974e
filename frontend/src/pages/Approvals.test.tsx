import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { ApiError } from "../lib/api";
import { makeContext, page, renderWith, stubFetch } from "../shell/testing";
import type { Approval } from "../shell/types";
import Approvals from "./Approvals";
import { changeNote, conflictMessage, listPath } from "./inbox";

afterEach(() => vi.unstubAllGlobals());

const approval = (id: number, extra: Partial<Approval> = {}): Approval => ({
  id, run: 40 + id, step: 1, graph: 3, graph_name: `Refund ${id}`, node_id: "approve", purpose: "gate", status: "pending",
  prompt: `Refund order ${id}?`, payload: {}, approvers: [], approver_groups: ["approvers"], decision: "", comment: "", decided_by: "",
  created_at: "2026-12-01T10:00:00Z", decided_at: null, may_decide: true, version: "1:abc", last_change: "", claimed_by: "",
  claimed_at: null, quorum: 1, votes: [], reason: "", values: null, run_status: "waiting", started_by: "olu", cost_usd: "0.0012",
  budget_usd: "0.25", next_actions: [{ node_id: "issue", kind: "tool", label: "Issue refund", arguments: { tool: "issue_refund", args: { order_id: "A-1" } } }],
  state: { order_id: "A-1" }, reject_reasons: [], edit_schema: null, starter_counts: false, ...extra,
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
    const reject = await screen.findByRole("button", { name: "Reject" });
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
  });
});
