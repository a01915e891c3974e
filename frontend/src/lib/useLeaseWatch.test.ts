import { describe, expect, it } from "vitest";
import { LEASE_CHECK_MARGIN_MS, LEASE_CHECK_MAX_MS, LEASE_CHECK_MIN_MS, nextLeaseCheck } from "./useLeaseWatch";

const now = Date.parse("2026-12-02T10:00:00Z");
const at = (seconds: number) => new Date(now + seconds * 1000).toISOString();

describe("nextLeaseCheck", () => {
  it("waits for nothing when no step runs", () => {
    expect(nextLeaseCheck(undefined, now)).toBeNull();
    expect(nextLeaseCheck([{ status: "succeeded" }, { status: "pending" }], now)).toBeNull();
  });

  it("checks just after the earliest running lease runs out", () => {
    const steps = [
      { status: "running", worker_alive: true, lease_expires_at: at(8) },
      { status: "running", worker_alive: true, lease_expires_at: at(5) },
      { status: "succeeded", lease_expires_at: at(2) },
    ] as const;
    expect(nextLeaseCheck(steps, now)).toBe(5000 + LEASE_CHECK_MARGIN_MS);
  });

  it("does not watch a step already shown interrupted (recovery commits an event)", () => {
    expect(nextLeaseCheck([{ status: "running", worker_alive: false, lease_expires_at: at(-3) }], now)).toBeNull();
  });

  it("clamps a past expiry, a far one and a missing one", () => {
    expect(nextLeaseCheck([{ status: "running", worker_alive: true, lease_expires_at: at(-60) }], now)).toBe(LEASE_CHECK_MIN_MS);
    expect(nextLeaseCheck([{ status: "running", worker_alive: true, lease_expires_at: at(600) }], now)).toBe(LEASE_CHECK_MAX_MS);
    expect(nextLeaseCheck([{ status: "running", worker_alive: true, lease_expires_at: null }], now)).toBe(LEASE_CHECK_MAX_MS);
  });
});
