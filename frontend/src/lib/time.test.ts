import { epochMs, formatAgo, formatBetween, formatClock, formatDateTime, formatFromStart, formatOffset, formatSpan } from "./time";

// Built from local components: the expectations hold in any time zone the tests run in.
const local = new Date(2026, 11, 1, 20, 31, 5, 123);

describe("time", () => {
  it("reads ISO strings, epoch ms and Dates, and nothing else", () => {
    expect(epochMs("2026-12-01T10:00:00.250Z")).toBe(Date.UTC(2026, 11, 1, 10, 0, 0, 250));
    expect(epochMs(local)).toBe(local.getTime());
    expect(epochMs(42)).toBe(42);
    expect(epochMs(null)).toBeNull();
    expect(epochMs("")).toBeNull();
    expect(epochMs("not a time")).toBeNull();
  });

  it("writes clock times to the millisecond in local time", () => {
    expect(formatClock(local.toISOString())).toBe("20:31:05.123");
    expect(formatClock(new Date(2026, 0, 2, 3, 4, 5, 6).getTime())).toBe("03:04:05.006");
    expect(formatClock(null)).toBe("—");
    expect(formatDateTime(local.toISOString())).toBe("2026-12-01 20:31:05.123");
    expect(formatDateTime(local.toISOString(), "minute")).toBe("2026-12-01 20:31");
    expect(formatDateTime(undefined)).toBe("—");
    expect(formatDateTime("garbage")).toBe("garbage");
  });

  it("writes spans at each scale, finely on request", () => {
    expect(formatSpan(250)).toBe("250 ms");
    expect(formatSpan(2000)).toBe("2.0 s");
    expect(formatSpan(12_340)).toBe("12.3 s");
    expect(formatSpan(12_340, true)).toBe("12.340 s");
    expect(formatSpan(245_250)).toBe("4 min 05 s");
    expect(formatSpan(245_250, true)).toBe("4 min 05.250 s");
    expect(formatSpan(7_380_000)).toBe("2 h 03 min");
    expect(formatSpan(-1)).toBe("—");
    expect(formatBetween("2026-12-01T10:00:00.000Z", "2026-12-01T10:00:01.250Z")).toBe("1.3 s");
    expect(formatBetween("2026-12-01T10:00:01Z", "2026-12-01T10:00:00Z")).toBe("—");
    expect(formatBetween(null, "2026-12-01T10:00:00Z")).toBe("—");
  });

  it("writes offsets from a run's start with milliseconds", () => {
    expect(formatOffset(1250)).toBe("+1.250 s");
    expect(formatOffset(85)).toBe("+0.085 s");
    expect(formatOffset(0)).toBe("+0.000 s");
    expect(formatOffset(-10)).toBe("−0.010 s");
    expect(formatOffset(125_250)).toBe("+2 min 05.250 s");
    expect(formatFromStart("2026-12-01T10:00:01.250Z", "2026-12-01T10:00:00Z")).toBe("+1.250 s from run start");
    expect(formatFromStart("2026-12-01T10:00:01.250Z", null)).toBe("");
  });

  it("writes how long ago, and how soon", () => {
    const now = Date.UTC(2026, 11, 1, 12, 0, 0);
    expect(formatAgo(now - 400, now)).toBe("just now");
    expect(formatAgo(now - 3_400, now)).toBe("3 s ago");
    expect(formatAgo(now - 4 * 60_000 - 10, now)).toBe("4 min ago");
    expect(formatAgo(now - 2 * 3_600_000, now)).toBe("2 h ago");
    expect(formatAgo(now - 5 * 86_400_000, now)).toBe("5 d ago");
    expect(formatAgo(now + 2_000, now)).toBe("in 2 s");
    expect(formatAgo(null, now)).toBe("");
  });
});
