import { statusKey } from "../lib/statusTokens";
import { formatCost, formatDuration, formatSpend, formatTokens, formatUsd, startedBy, statusLabel, versionText } from "./format";

describe("format", () => {
  it("names who started a run, and the trigger before the user it ran as", () => {
    expect(startedBy({ created_by: "pat" })).toBe("pat");
    expect(startedBy({ created_by: null, started_from: "command line" })).toBe("command line");
    expect(startedBy({ created_by: null })).toBe("—");
    expect(startedBy({ created_by: "pat", source: "webhook orders" })).toBe("webhook orders, as pat");
    expect(startedBy({ created_by: null, source: "webhook orders" })).toBe("webhook orders");
    expect(startedBy({ created_by: "pat", source: "" })).toBe("pat");
  });
  it("formats durations at each scale and dashes missing ends", () => {
    const t0 = "2026-12-01T10:00:00.000Z";
    expect(formatDuration(t0, "2026-12-01T10:00:00.250Z")).toBe("250 ms");
    expect(formatDuration(t0, "2026-12-01T10:00:12.340Z")).toBe("12.3 s");
    expect(formatDuration(t0, "2026-12-01T10:04:05.000Z")).toBe("4 min 05 s");
    expect(formatDuration(t0, "2026-12-01T12:03:00.000Z")).toBe("2 h 03 min");
    expect(formatDuration(t0, null)).toBe("—");
    expect(formatDuration("2026-12-01T10:00:01Z", t0)).toBe("—");
  });

  it("formats API decimal dollars", () => {
    expect(formatUsd("0.000000")).toBe("$0");
    expect(formatUsd("0.001234567")).toBe("$0.001235");
    expect(formatUsd("12.5")).toBe("$12.50");
    expect(formatUsd(null)).toBe("—");
  });

  it("formats tokens and estimates one way for the whole app", () => {
    expect(formatTokens(12345)).toBe("12,345 tokens");
    expect(formatTokens(1)).toBe("1 token");
    expect(formatCost({ usd: "0.004000", tokens: 1200 })).toBe("$0.004 · 1,200 tokens");
    expect(formatCost({ usd: null, tokens: 80 })).toBe("— · 80 tokens");
    expect(formatCost(undefined)).toBe("—");
  });

  it("names and colours statuses", () => {
    expect(statusLabel("waiting_approval")).toBe("waiting approval");
    expect(statusKey("succeeded")).toBe("succeeded");
    expect(statusKey("failed")).toBe("failed");
    expect(statusKey("running")).toBe("running");
    expect(statusKey("parked")).toBe("parked");
  });
});

describe("runDisplayStatus", () => {
  it("tells interrupted, waiting for a decision and waiting at an approval apart", async () => {
    const { runDisplayStatus, stepDisplayStatus } = await import("./format");
    expect(runDisplayStatus({ status: "running", interrupted: true, waiting_for: null })).toBe("interrupted");
    expect(runDisplayStatus({ status: "waiting", waiting_for: "decision" })).toBe("waiting_for_decision");
    expect(runDisplayStatus({ status: "waiting", waiting_for: "approval" })).toBe("waiting_at_approval");
    expect(runDisplayStatus({ status: "succeeded", waiting_for: null, interrupted: false })).toBe("succeeded");
    expect(stepDisplayStatus({ status: "running", worker_alive: false })).toBe("interrupted");
    expect(stepDisplayStatus({ status: "running", worker_alive: true })).toBe("running");
    expect(statusKey("waiting_for_decision")).not.toBe(statusKey("waiting_at_approval"));
    expect(statusKey("interrupted")).toBe("interrupted");
  });
});

describe("queue place", () => {
  it("says the position and which limit holds a queued run", async () => {
    const { queuePosition, queueReason } = await import("./format");
    const place = { position: 3, limit: "concurrency_key", key: "acme", max: 1 };
    expect(queuePosition(place)).toBe("position 3");
    expect(queueReason(place)).toBe('concurrency key "acme" allows 1 active run at a time');
    expect(queueReason({ ...place, limit: "max_concurrent_runs", key: null, max: 2 })).toBe("the graph allows 2 active runs at a time");
    expect(queueReason({ ...place, limit: "schedule_overlap" })).toContain("overlap policy queue");
  });
});

describe("formatSpend", () => {
  it("says unknown when no attempt has a price, never $0", () => {
    expect(formatSpend("0.000000", 2, 2)).toBe("unknown");
    expect(formatSpend("0", 1, 1)).not.toContain("$0");
  });
  it("adds unknown to a priced sum that leaves attempts out", () => {
    expect(formatSpend("0.0125", 1, 3)).toBe("$0.0125 + unknown");
  });
  it("is formatUsd when every attempt is priced", () => {
    expect(formatSpend("1.5", 0, 4)).toBe(formatUsd("1.5"));
    expect(formatSpend("0", 0, 0)).toBe("$0");
  });
});

describe("versionText", () => {
  it("names a node-test run's hidden snapshot as a test, not as version 0", () => {
    expect(versionText({ version: 3 })).toBe("v3");
    expect(versionText({ version: 0, is_test: true })).toBe("test");
  });
});
