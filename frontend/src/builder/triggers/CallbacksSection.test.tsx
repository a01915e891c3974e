// CallbacksSection: a refused URL shown under its field, the secret shown once after a create, the delivery log with its last error, and Redeliver through the API.
import { render, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Callback, CallbackDelivery } from "../../api/types";
import { scriptFetch } from "../panel/testing";
import { CallbacksSection } from "./CallbacksSection";

vi.setConfig({ testTimeout: 30_000 });
afterEach(() => vi.unstubAllGlobals());

HTMLDialogElement.prototype.showModal ??= function (this: HTMLDialogElement) { this.open = true; };
HTMLDialogElement.prototype.close ??= function (this: HTMLDialogElement) { this.open = false; };

const at = "2026-12-07T05:00:00Z";
const notify: Callback = {
  id: 3, graph: 4, name: "notify", url: "https://example.com/hook", events: ["succeeded", "failed"], enabled: true,
  created_by: "pat", created_at: at, updated_at: at,
};
const failed: CallbackDelivery = {
  id: 9, callback: 3, callback_name: "notify", run: 41, event: "failed", message_id: "msg_abc", status: "failed", attempts: 8,
  next_due_at: null, last_status_code: 500, last_error: "HTTP 500: receiver says no", created_at: at, last_attempt_at: at, delivered_at: null,
};

describe("CallbacksSection", () => {
  it("shows a refused URL under its field, then the secret once", async () => {
    let posts = 0;
    scriptFetch((call) => {
      if (call.method === "POST") {
        posts += 1;
        if (posts === 1) return [400, { error: { code: "invalid", message: "Refused", fields: { url: ["Refused by the outbound guard: a private address."] } } }];
        return [201, { ...notify, secret: "whsec_c2VjcmV0" }];
      }
      if (call.url.includes("callback-deliveries")) return [200, { count: 0, next: null, previous: null, results: [] }];
      return [200, posts > 1 ? [notify] : []];
    });
    const user = userEvent.setup();
    render(<CallbacksSection graphId={4} />);
    await screen.findByText("No callbacks yet.");
    await user.click(screen.getByRole("button", { name: "New callback" }));
    const dialog = await screen.findByRole("dialog", { name: "New completion callback" });
    await user.type(within(dialog).getByLabelText("Name"), "notify");
    await user.type(within(dialog).getByLabelText("URL"), "http://10.0.0.5/x");
    await user.click(within(dialog).getByRole("button", { name: "Create callback" }));
    expect(await within(dialog).findByText("Refused by the outbound guard: a private address.")).toBeTruthy();
    await user.click(within(dialog).getByRole("button", { name: "Create callback" }));
    const shown = await screen.findByRole("dialog", { name: "Callback “notify” created" });
    expect((within(shown).getByLabelText("Signing secret") as HTMLInputElement).value).toBe("whsec_c2VjcmV0");
    expect(await screen.findByRole("listitem", { name: "Callback notify" })).toBeTruthy();
  });

  it("lists an undeliverable delivery with its last error and redelivers it", async () => {
    let redelivered = false;
    const calls = scriptFetch((call) => {
      if (call.url.endsWith("/redeliver/")) { redelivered = true; return [200, { ...failed, status: "pending", attempts: 0, last_error: "" }]; }
      if (call.url.includes("callback-deliveries")) {
        return [200, { count: 1, next: null, previous: null, results: [redelivered ? { ...failed, status: "pending", attempts: 0, last_error: "" } : failed] }];
      }
      return [200, [notify]];
    });
    const user = userEvent.setup();
    render(<CallbacksSection graphId={4} />);
    const log = await screen.findByRole("table", { name: "Callback deliveries" });
    expect(within(log).getByText("Last error: HTTP 500: receiver says no")).toBeTruthy();
    expect(within(log).getByRole("link", { name: "run #41" }).getAttribute("href")).toBe("/runs/41/");
    await user.click(within(log).getByRole("button", { name: "Redeliver" }));
    await waitFor(() => expect(within(screen.getByRole("table", { name: "Callback deliveries" })).getByText("pending")).toBeTruthy());
    expect(calls.filter((c) => c.method === "POST").map((c) => c.url.replace(/^.*callback-deliveries\//, ""))).toEqual(["9/redeliver/"]);
  });
});
