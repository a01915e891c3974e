// SchedulesSection: next fire times, Pause and Run now through the API, a refused cron shown under its field, the edit form (only changed fields sent, refusals at their fields) and the tick log.
import { render, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { scriptFetch } from "../panel/testing";
import { SchedulesSection } from "./SchedulesSection";
import { duration, parseInput, scheduleBody, scheduleDraft, scheduleFieldErrors, tickError, type Schedule, type ScheduleTick } from "./schedules";

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
    render(<SchedulesSection graphId={4} latestVersion={2} />);
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
    render(<SchedulesSection graphId={4} latestVersion={2} />);
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

const tick = (id: number, extra: Partial<ScheduleTick>): ScheduleTick => ({
  id, tick_at: times[0]!, fired_at: times[0]!, manual: false, outcome: "started", run: null, missed: 0, error: null, ...extra,
});

describe("SchedulesSection edit and tick log", () => {
  it("edits a schedule: sends only what changed, shows refusals at their fields, then the new fire times", async () => {
    let current = nightly;
    const later = ["2026-12-08T05:00:00Z", "2026-12-09T05:00:00Z"];
    const calls = scriptFetch((call) => {
      if (call.method === "PATCH") {
        const body = call.body as Record<string, unknown>;
        if (body.cron === "0 25 * * *") return [400, { error: { code: "invalid", message: "Invalid cron expression: Bad hour.", fields: { cron: ["Bad hour."], catch_up_window_seconds: ["Between 1 and 604800 seconds."] } } }];
        current = { ...current, ...body, next_fire_times: later } as Schedule;
        return [200, current];
      }
      return [200, [current]];
    });
    const user = userEvent.setup();
    render(<SchedulesSection graphId={4} latestVersion={3} />);
    const card = await screen.findByRole("listitem", { name: "Schedule nightly" });
    await user.click(within(card).getByRole("button", { name: "Edit" }));
    const dialog = await screen.findByRole("dialog", { name: "Edit schedule nightly" });
    expect((within(dialog).getByLabelText("Cron expression") as HTMLInputElement).value).toBe("30 2 * * *");
    expect((within(dialog).getByLabelText("Time zone") as HTMLInputElement).value).toBe("Europe/Paris");
    expect(within(dialog).getAllByRole("option").map((o) => o.textContent).slice(0, 4)).toEqual(["Latest published (now v3)", "Version 3", "Version 2", "Version 1"]);
    expect(within(dialog).queryByLabelText("Catch-up window (seconds)")).toBeNull();
    const cron = within(dialog).getByLabelText("Cron expression");
    await user.clear(cron);
    await user.type(cron, "0 25 * * *");
    await user.selectOptions(within(dialog).getByLabelText("Ticks missed in an outage"), "catch_up");
    const window = within(dialog).getByLabelText("Catch-up window (seconds)");
    await user.clear(window);
    await user.type(window, "0");
    await user.click(within(dialog).getByRole("button", { name: "Save schedule" }));
    expect(await within(dialog).findByText("Bad hour.")).toBeTruthy();
    expect(cron.getAttribute("aria-invalid")).toBe("true");
    expect(within(dialog).getByText("Between 1 and 604800 seconds.")).toBeTruthy();
    expect(calls.find((c) => c.method === "PATCH")?.body).toEqual({ cron: "0 25 * * *", missed_policy: "catch_up", catch_up_window_seconds: 0 });
    await user.clear(cron);
    await user.type(cron, "0 6 * * *");
    await user.clear(window);
    await user.type(window, "7200");
    expect(within(dialog).getByText(/within 2 h of it/)).toBeTruthy();
    await user.selectOptions(within(dialog).getByLabelText("Version"), "2");
    await user.click(within(dialog).getByRole("button", { name: "Save schedule" }));
    await waitFor(() => expect(screen.queryByRole("dialog")).toBeNull());
    expect(calls.filter((c) => c.method === "PATCH")[1]!.body).toEqual({ cron: "0 6 * * *", version: 2, missed_policy: "catch_up", catch_up_window_seconds: 7200 });
    const list = await screen.findByRole("list", { name: "Next fire times of nightly" });
    await waitFor(() => expect(within(list).getAllByRole("listitem").map((li) => li.querySelector("time")?.getAttribute("datetime"))).toEqual(later));
    expect(screen.getByText(/run the latest once, within 2 h/)).toBeTruthy();
  });

  it("shows the tick log with outcomes, runs, missed counts and errors, and pages through it", async () => {
    const ticks = [
      tick(30, { manual: true, run: 41 }),
      tick(29, { outcome: "failed", missed: 2, error: { code: "invalid_input", message: "The input does not match.", fields: { x: ["required"] } } }),
      tick(28, { outcome: "skipped_overlap" }),
    ];
    const calls = scriptFetch((call) => {
      if (call.url.includes("/ticks/")) {
        const page = Number(new URL(call.url, "http://x").searchParams.get("page"));
        return [200, { count: 13, next: page === 1 ? "next" : null, previous: page === 2 ? "prev" : null, results: page === 1 ? ticks : [tick(18, { outcome: "skipped_missed" })] }];
      }
      return [200, [nightly]];
    });
    const user = userEvent.setup();
    render(<SchedulesSection graphId={4} latestVersion={2} />);
    const card = await screen.findByRole("listitem", { name: "Schedule nightly" });
    await user.click(within(card).getByRole("button", { name: "Tick log" }));
    const table = await within(card).findByRole("table", { name: "Ticks of nightly" });
    const rows = within(table).getAllByRole("row").slice(1);
    expect(rows).toHaveLength(3);
    expect(within(rows[0]!).getByText("Run now")).toBeTruthy();
    expect(within(rows[0]!).getByText("Started a run")).toBeTruthy();
    expect(within(rows[0]!).getByRole("link", { name: "run #41" }).getAttribute("href")).toBe("/runs/41/");
    expect(within(rows[1]!).getByText("Failed to start")).toBeTruthy();
    expect(within(rows[1]!).getByText("The input does not match. · x: required")).toBeTruthy();
    expect(within(rows[1]!).getAllByRole("cell")[3]!.textContent).toBe("2");
    expect(within(rows[2]!).getByText("Skipped: previous run still active")).toBeTruthy();
    expect(within(card).getByText("Page 1 of 2")).toBeTruthy();
    await user.click(within(card).getByRole("button", { name: "Older" }));
    expect(await within(card).findByText("Skipped: missed")).toBeTruthy();
    expect(calls.some((c) => c.url.endsWith("/schedules/7/ticks/?page=2&page_size=10"))).toBe(true);
  });
});

describe("schedule helpers", () => {
  it("builds the request body: everything for a new schedule, the changes for an edit", () => {
    const fresh = scheduleBody({ ...scheduleDraft(null, "Europe/Paris"), name: " nightly ", input: "" }, null);
    expect(fresh).toEqual({ body: { name: "nightly", cron: "0 9 * * MON-FRI", timezone: "Europe/Paris", input: {}, version: null, overlap_policy: "skip", missed_policy: "skip", catch_up_window_seconds: 3600 } });
    expect(scheduleBody(scheduleDraft(nightly), nightly)).toEqual({ body: {} });
    expect(scheduleBody({ ...scheduleDraft(nightly), version: "1", input: "{\"x\": 3}" }, nightly)).toEqual({ body: { input: { x: 3 }, version: 1 } });
    expect(scheduleBody({ ...scheduleDraft(nightly), catch_up_window_seconds: "1.5", input: "[" }, nightly)).toEqual({
      error: { input: "Not valid JSON.", catch_up_window_seconds: "A whole number of seconds." },
    });
    expect([duration(86400), duration(7200), duration(90), duration(45)]).toEqual(["1 d", "2 h", "90 s", "45 s"]);
    expect(tickError({ code: "x", message: "Nope.", fields: {} })).toBe("Nope.");
    expect(tickError(null)).toBe("");
  });

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
