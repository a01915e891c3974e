// SchedulesSection: next fire times, Pause and Run now through the API, and a refused cron shown under its field.
import { render, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { scriptFetch } from "../panel/testing";
import { SchedulesSection } from "./SchedulesSection";
import { parseInput, scheduleFieldErrors, type Schedule } from "./schedules";

vi.setConfig({ testTimeout: 30_000 });
afterEach(() => vi.unstubAllGlobals());

// jsdom has no showModal: the builder's Dialog opens a <dialog> with it.
HTMLDialogElement.prototype.showModal ??= function (this: HTMLDialogElement) { this.open = true; };
HTMLDialogElement.prototype.close ??= function (this: HTMLDialogElement) { this.open = false; };

const times = ["2026-12-08T01:30:00Z", "2026-12-09T01:30:00Z", "2026-12-10T01:30:00Z"];
const nightly: Schedule = {
  id: 7, graph: 4, name: "nightly", cron: "30 2 * * *", timezone: "Europe/Paris", input: { x: 2 }, version: null, run_as: "pat",
  paused: false, overlap_policy: "skip", missed_policy: "skip", catch_up_window_seconds: 3600, next_fire_at: times[0]!,
  next_fire_times: times, last_run: null, source: "schedule nightly", created_at: times[0]!, updated_at: times[0]!,
};

describe("SchedulesSection", () => {
  it("lists next fire times, pauses and runs now", async () => {
    let paused = false;
    const calls = scriptFetch((call) => {
      if (call.url.endsWith("/pause/")) { paused = true; return [200, { ...nightly, paused: true, next_fire_at: null, next_fire_times: [] }]; }
      if (call.url.endsWith("/run-now/")) return [201, { run: 41, status: "queued", source: "schedule nightly" }];
      return [200, [paused ? { ...nightly, paused: true, next_fire_at: null, next_fire_times: [] } : nightly]];
    });
    const user = userEvent.setup();
    render(<SchedulesSection graphId={4} published />);
    const card = await screen.findByRole("listitem", { name: "Schedule nightly" });
    const list = within(card).getByRole("list", { name: "Next fire times of nightly" });
    expect(within(list).getAllByRole("listitem").map((li) => li.querySelector("time")?.getAttribute("datetime"))).toEqual(times);
    await user.click(within(card).getByRole("button", { name: "Run now" }));
    expect(await within(card).findByText(/Started/)).toBeTruthy();
    expect(within(card).getByRole("link", { name: "run #41" }).getAttribute("href")).toBe("/runs/41/");
    await user.click(within(card).getByRole("button", { name: "Pause" }));
    await waitFor(() => expect(screen.getByText(/Paused: no tick fires/)).toBeTruthy());
    expect(screen.getByRole("button", { name: "Resume" })).toBeTruthy();
    expect(calls.filter((c) => c.method === "POST").map((c) => c.url.replace(/^.*schedules\//, ""))).toEqual(["7/run-now/", "7/pause/"]);
  });

  it("shows a refused cron and a bad input under their fields", async () => {
    const calls = scriptFetch((call) => {
      if (call.method === "POST") return [400, { error: { code: "invalid", message: "Invalid cron expression: Bad minute.", fields: { cron: ["Invalid cron expression: Bad minute."] } } }];
      return [200, []];
    });
    const user = userEvent.setup();
    render(<SchedulesSection graphId={4} published />);
    await screen.findByText("No schedules yet.");
    await user.click(screen.getByRole("button", { name: "New schedule" }));
    const dialog = await screen.findByRole("dialog", { name: "New schedule" });
    const input = within(dialog).getByLabelText("Run input (JSON)");
    await user.clear(input);
    await user.type(input, "[[1]");
    await user.click(within(dialog).getByRole("button", { name: "Create schedule" }));
    expect(await within(dialog).findByText("The input must be a JSON object, e.g. {\"x\": 1}.")).toBeTruthy();
    expect(calls.filter((c) => c.method === "POST")).toEqual([]);
    await user.clear(input);
    await user.type(within(dialog).getByLabelText("Name"), "nightly");
    const cron = within(dialog).getByLabelText("Cron expression");
    await user.clear(cron);
    await user.type(cron, "61 * * * *");
    await user.click(within(dialog).getByRole("button", { name: "Create schedule" }));
    expect(await within(dialog).findByText("Invalid cron expression: Bad minute.")).toBeTruthy();
    expect(cron.getAttribute("aria-invalid")).toBe("true");
    expect(calls.find((c) => c.method === "POST")?.body).toMatchObject({ name: "nightly", cron: "61 * * * *", input: {} });
  });
});

describe("schedule helpers", () => {
  it("parses the input and places field errors", () => {
    expect(parseInput("")).toEqual({ value: {} });
    expect(parseInput("{\"x\": 1}")).toEqual({ value: { x: 1 } });
    expect("error" in parseInput("[1]")).toBe(true);
    expect("error" in parseInput("{")).toBe(true);
    expect(scheduleFieldErrors({ cron: ["bad"], "input.x": ["not an integer"], run_as: ["no"] })).toEqual({
      byField: { cron: "bad", input: "x: not an integer" }, rest: ["run_as: no"],
    });
  });
});
