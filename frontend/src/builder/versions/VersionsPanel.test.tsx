// Version history: list, open, diff (logic and layout apart), restore and its 409, permissions.
import type { VersionDiff } from "../../api/types";
import { render, screen, waitFor, within } from "@testing-library/react";
import { PageContextReact, type PageContext } from "../../lib/context";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { scriptFetch } from "../panel/testing";
import { diffItems, diffNodeStatus } from "./diff";
import { VersionsPanel } from "./VersionsPanel";

vi.setConfig({ testTimeout: 30_000 });
afterEach(() => vi.unstubAllGlobals());

const VERSIONS = {
  count: 3,
  next: null,
  previous: null,
  results: [
    { number: 3, message: "Stricter routing", created_by: "alice", created_at: "2026-12-01T10:00:00Z" },
    { number: 2, message: "", created_by: "bob", created_at: "2026-11-30T10:00:00Z" },
    { number: 1, message: "First", created_by: "alice", created_at: "2026-11-29T10:00:00Z" },
  ],
};

const DIFF: VersionDiff = {
  from: 1,
  to: 3,
  nodes: {
    added: ["review"],
    removed: ["old"],
    changed: [{ id: "route", fields: { config: { from: { expression: "x > 1" }, to: { expression: "x > 2" } } } }],
  },
  edges: { added: [{ source: "route", source_handle: "true", target: "review" }], removed: [] },
  settings: { max_steps: { from: 1000, to: 50 } },
  state: {},
  input_schema: null,
  description: null,
  layout: { positions: ["start"], notes: { added: ["n1"], removed: [], changed: [] } },
  logic_identical: false,
  identical: false,
};

describe("diff helpers", () => {
  it("lists logic and layout apart, and gives node statuses for the canvas", () => {
    const { logic, layout } = diffItems(DIFF);
    expect(logic.map((i) => `${i.change} ${i.subject} ${i.name}`)).toEqual([
      "added node review",
      "removed node old",
      "changed node route",
      "added edge route.true → review",
      "changed setting max_steps",
    ]);
    expect(layout.map((i) => `${i.change} ${i.subject} ${i.name}`)).toEqual(["changed position start", "added note n1"]);
    expect(diffNodeStatus(DIFF)).toEqual({ review: "added", old: "removed", route: "changed" });
  });

  it("treats a position-only change from an older server as layout", () => {
    // An older server's answer: no layout yet, so the schema's type does not describe it.
    const old = { ...DIFF, layout: undefined, nodes: { added: [], removed: [], changed: [{ id: "a", fields: { position: { from: { x: 0, y: 0 }, to: { x: 5, y: 0 } } } }] } } as unknown as VersionDiff;
    expect(diffItems(old).logic.filter((i) => i.subject === "node")).toEqual([]);
    expect(diffItems(old).layout.map((i) => i.name)).toEqual(["a"]);
    expect(diffNodeStatus(old)).toEqual({});
  });
});

describe("VersionsPanel", () => {
  it("lists who published what, opens a version, and diffs two", async () => {
    const calls = scriptFetch(({ url }) => (url.includes("/diff/") ? [200, DIFF] : [200, VERSIONS]));
    const onOpen = vi.fn();
    const onDiff = vi.fn();
    const user = userEvent.setup();
    render(<VersionsPanel graphId={5} onOpenVersion={onOpen} onShowDiff={onDiff} />);
    await screen.findByText("Stricter routing");
    expect(screen.getByText("(no message)")).toBeTruthy();
    expect(screen.getAllByText(/alice/)).toHaveLength(2);
    await user.click(screen.getByRole("button", { name: "Open version 2" }));
    expect(onOpen).toHaveBeenCalledWith(2);

    const compare = screen.getByRole("button", { name: "Compare two versions" });
    expect((compare as HTMLButtonElement).disabled).toBe(true);
    await user.click(screen.getByLabelText("Compare version 3"));
    await user.click(screen.getByLabelText("Compare version 1"));
    await user.click(screen.getByRole("button", { name: "Compare v1 and v3" }));
    const list = await screen.findByRole("region", { name: "Changes from version 1 to 3" });
    expect(calls.at(-1)!.url).toBe("/api/v1/graphs/5/diff/?a=1&b=3&from=1&to=3");
    expect(onDiff).toHaveBeenCalledWith(DIFF);
    expect(within(list).getByText("review")).toBeTruthy();
    expect(within(list).getByText("route.true → review")).toBeTruthy();
    expect(within(list).getByText("Layout only")).toBeTruthy();
    await user.click(screen.getByRole("button", { name: "Clear comparison" }));
    expect(onDiff).toHaveBeenLastCalledWith(null);
  });

  it("restores a version as the draft from the stored revision", async () => {
    const calls = scriptFetch(({ url, method }) => {
      if (url.endsWith("/restore/")) return [200, { spec: { name: "g", nodes: [], edges: [] }, revision: 8 }];
      if (method === "GET" && url.endsWith("/graphs/5/")) return [200, { revision: 7 }];
      return [200, VERSIONS];
    });
    const onRestored = vi.fn();
    const user = userEvent.setup();
    render(<VersionsPanel graphId={5} onOpenVersion={vi.fn()} onShowDiff={vi.fn()} onRestored={onRestored} />);
    await user.click(await screen.findByRole("button", { name: "Restore version 1" }));
    await user.click(within(screen.getByRole("alertdialog")).getByRole("button", { name: "Restore version 1" }));
    await waitFor(() => expect(onRestored).toHaveBeenCalledWith({ spec: { name: "g", nodes: [], edges: [] }, revision: 8 }));
    const restore = calls.find((c) => c.url.endsWith("/restore/"))!;
    expect(restore.url).toBe("/api/v1/graphs/5/versions/1/restore/");
    expect(restore.body).toEqual({ base_revision: 7 });
  });

  it("explains a 409 on restore and keeps the draft", async () => {
    scriptFetch(({ url }) =>
      url.endsWith("/restore/")
        ? [409, { error: { code: "conflict", message: "The draft changed." }, current: { revision: 9, updated_by: "bob", updated_at: new Date().toISOString() } }]
        : [200, VERSIONS],
    );
    const onRestored = vi.fn();
    const user = userEvent.setup();
    render(<VersionsPanel graphId={5} baseRevision={7} onOpenVersion={vi.fn()} onShowDiff={vi.fn()} onRestored={onRestored} />);
    await user.click(await screen.findByRole("button", { name: "Restore version 2" }));
    await user.click(within(screen.getByRole("alertdialog")).getByRole("button", { name: "Restore version 2" }));
    const alert = await screen.findByText(/The draft was changed by bob/);
    expect(alert.textContent).toContain("Reload the page");
    expect(onRestored).not.toHaveBeenCalled();
  });

  it("shows an empty history and a failed load", async () => {
    scriptFetch(() => [200, { count: 0, next: null, previous: null, results: [] }]);
    const { unmount } = render(<VersionsPanel graphId={5} onOpenVersion={vi.fn()} onShowDiff={vi.fn()} />);
    await screen.findByText(/Nothing published yet/);
    unmount();
    scriptFetch(() => [500, { error: { code: "server_error", message: "Boom." } }]);
    render(<VersionsPanel graphId={5} onOpenVersion={vi.fn()} onShowDiff={vi.fn()} />);
    expect((await screen.findByRole("alert")).textContent).toContain("Boom.");
  });
});

describe("VersionsPanel for a user who may not build", () => {
  it("lists and opens versions but offers no restore", async () => {
    scriptFetch(() => [200, VERSIONS]);
    const ctx: PageContext = {
      page: "builder",
      title: "g",
      csrf_token: "t",
      urls: {},
      props: {},
      user: { id: 2, username: "ann", display_name: "Ann", is_staff: false, groups: ["approvers"], can: { build: false, operate: false, approve: true, admin: false } },
    };
    render(
      <PageContextReact.Provider value={ctx}>
        <VersionsPanel graphId={5} onOpenVersion={vi.fn()} onShowDiff={vi.fn()} />
      </PageContextReact.Provider>,
    );
    await screen.findByText("Stricter routing");
    expect(screen.getByRole("button", { name: "Open version 3" })).toBeTruthy();
    expect(screen.queryByRole("button", { name: /Restore/ })).toBeNull();
  });
});
