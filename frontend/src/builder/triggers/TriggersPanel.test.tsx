// TriggersPanel: the list, the create form's field errors, the secret shown once, and a listen that pins its capture.
import type { Webhook } from "../../api/types";
import { render, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { scriptFetch } from "../panel/testing";
import { TriggersPanel } from "./TriggersPanel";

vi.setConfig({ testTimeout: 30_000 });
afterEach(() => vi.unstubAllGlobals());

// jsdom has no showModal: the builder's Dialog opens a <dialog> with it.
HTMLDialogElement.prototype.showModal ??= function (this: HTMLDialogElement) { this.open = true; };
HTMLDialogElement.prototype.close ??= function (this: HTMLDialogElement) { this.open = false; };

const hook: Webhook = {
  id: 3, graph: 4, name: "orders", enabled: false, version: null, signed: true, timestamp_window_seconds: 300,
  input_mapping: {}, run_as: "pat", listening_until: null, created_by: "pat", created_at: "2026-01-01T00:00:00Z",
  updated_at: "2026-01-01T00:00:00Z",
};
const schema = { type: "object", properties: { x: { type: "integer" } }, required: ["x"] };

describe("TriggersPanel", () => {
  it("shows the server's refusals under their fields, then the URL and secret once", async () => {
    let created = false;
    const calls = scriptFetch((call) => {
      if (call.url.includes("/schedules/") || call.url.includes("/callbacks/")) return [200, []];
      if (call.url.includes("/callback-deliveries/")) return [200, { count: 0, next: null, previous: null, results: [] }];
      if (call.method === "POST" && !created) {
        created = true;
        return [400, { error: { code: "invalid", message: "The input mapping cannot satisfy the input schema.",
          fields: { name: ["This field may not be blank."], "input_mapping.x": ["Version 1 requires 'x'."], run_as: ["pat may not start runs."] } } }];
      }
      if (call.method === "POST") return [201, { ...hook, url: "http://h/api/v1/hooks/tok/", secret: "s3cret" }];
      return [200, created ? [hook] : []];
    });
    const user = userEvent.setup();
    render(<TriggersPanel graphId={4} latestVersion={1} inputSchema={schema} testInput={null} onPin={vi.fn()} />);
    await screen.findByText("No webhooks yet.");
    await user.click(screen.getByRole("button", { name: "New webhook" }));
    await user.click(screen.getByRole("button", { name: "Create webhook" }));
    expect(await screen.findByText("This field may not be blank.")).toBeTruthy();
    expect(screen.getByText("x: Version 1 requires 'x'.")).toBeTruthy();
    expect(screen.getByText("run_as: pat may not start runs.")).toBeTruthy();
    await user.type(screen.getByLabelText("Name"), "orders");
    await user.click(screen.getByRole("button", { name: "Create webhook" }));
    const shown = await screen.findByRole("dialog", { name: "Webhook “orders” created" });
    expect(within(shown).getByText(/you will not see them again/)).toBeTruthy();
    expect((within(shown).getByLabelText("Secret", { exact: true }) as HTMLInputElement).value).toBe("s3cret");
    expect(calls.filter((c) => c.method === "POST")[1]?.body).toEqual({ name: "orders", version: null, signed: true, enabled: true, input_mapping: {} });
  });

  it("listens, and pins the captured delivery's input", async () => {
    let polls = 0;
    scriptFetch((call) => {
      if (call.url.includes("/schedules/") || call.url.includes("/callbacks/")) return [200, []];
      if (call.url.includes("/callback-deliveries/")) return [200, { count: 0, next: null, previous: null, results: [] }];
      if (call.url.endsWith("/listen/") && call.method === "POST") return [200, { listening: true, listening_until: new Date(Date.now() + 120_000).toISOString(), after: 5, delivery: null }];
      if (call.url.includes("/listen/?after=5")) {
        polls++;
        return [200, polls < 2 ? { listening: true, listening_until: null, after: 5, delivery: null }
          : { listening: false, listening_until: null, after: 5, delivery: { id: 6, delivery_id: "", received_at: new Date().toISOString(), status_code: 202, run: null, replayed: false, error: null, payload: { x: 9 } } }];
      }
      return [200, [hook]];
    });
    const onPin = vi.fn();
    const user = userEvent.setup();
    render(<TriggersPanel graphId={4} latestVersion={1} inputSchema={schema} testInput={null} onPin={onPin} />);
    await user.click(await screen.findByRole("button", { name: "Listen for test event" }));
    expect(await screen.findByText(/Listening for the next delivery/)).toBeTruthy();
    await waitFor(() => expect(onPin).toHaveBeenCalledWith({ x: 9 }), { timeout: 10_000 });
    expect(await screen.findByText(/its input is pinned as the draft's test input/)).toBeTruthy();
  });
});
