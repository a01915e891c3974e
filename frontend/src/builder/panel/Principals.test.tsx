// An approval node's approvers and a graph's operators are picked from the server's users and groups, and stored as plain names.
import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { SidePanel } from "./SidePanel";
import { renderInBuilder, sampleSpec, scriptFetch, type FetchCall } from "./testing";

vi.setConfig({ testTimeout: 30_000 });
afterEach(() => vi.unstubAllGlobals());

const PRINCIPALS = [
  { kind: "user", name: "ada", label: "Ada Lovelace (ada)" },
  { kind: "group", name: "finance", label: "finance" },
];

function server(): FetchCall[] {
  return scriptFetch((call) => {
    if (call.url.startsWith("/api/v1/principals/")) {
      const kind = new URL(call.url, "http://x").searchParams.get("kind");
      return [200, { results: PRINCIPALS.filter((p) => !kind || p.kind === kind) }];
    }
    if (call.url === "/api/v1/graphs/7/" && call.method === "GET") return [200, { id: 7, operators: ["grace"], operator_groups: [] }];
    if (call.url === "/api/v1/graphs/7/" && call.method === "PATCH") return [200, { id: 7, ...(call.body as object) }];
    return [200, { ok: true, errors: [], tools: [], providers: [] }];
  });
}

describe("user and group pickers in the builder", () => {
  it("an approval node's approvers and approver groups are picked, and the spec keeps lists of names", async () => {
    server();
    const spec = sampleSpec();
    spec.nodes.push({ id: "gate", kind: "approval", config: { prompt: "ok?" } });
    const { harness } = renderInBuilder(<SidePanel />, { spec, selection: { nodes: ["gate"] } });
    const user = userEvent.setup();
    await user.type(await screen.findByRole("combobox", { name: "Approvers" }), "ad");
    await user.click(await screen.findByRole("option", { name: /Ada Lovelace/ }));
    await waitFor(() => expect(harness.api().spec.nodes.find((n) => n.id === "gate")?.config.approvers).toEqual(["ada"]));
    await user.type(screen.getByRole("combobox", { name: "Approver groups" }), "fin");
    await user.click(await screen.findByRole("option", { name: /finance/ }));
    await waitFor(() => expect(harness.api().spec.nodes.find((n) => n.id === "gate")?.config.approver_groups).toEqual(["finance"]));
    await user.click(screen.getByRole("button", { name: "Remove user ada" }));
    await waitFor(() => expect(harness.api().spec.nodes.find((n) => n.id === "gate")?.config.approvers).toBeUndefined());
  });

  it("the graph settings name its operators, saved to the graph at once", async () => {
    const calls = server();
    renderInBuilder(<SidePanel />, { spec: sampleSpec() });
    expect(await screen.findByRole("button", { name: "Remove user grace" })).toBeTruthy();
    const user = userEvent.setup();
    await user.type(screen.getByRole("combobox", { name: "Operators" }), "fin");
    await user.click(await screen.findByRole("option", { name: /finance/ }));
    await waitFor(() => expect(calls.find((c) => c.method === "PATCH")?.body).toEqual({ operators: ["grace"], operator_groups: ["finance"] }));
    expect(await screen.findByText(/Saved\./)).toBeTruthy();
  });
});
