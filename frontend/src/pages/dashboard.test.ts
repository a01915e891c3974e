import { costsLink, errorLine, runsLink, spendPeriod, spendRanges } from "./dashboard";

describe("dashboard", () => {
  it("words the week's spend as the week's even on a Monday, when its range is today alone", () => {
    const monday = spendRanges(new Date("2026-12-07T14:00:00Z"));
    expect(spendPeriod(true, monday.week)).toBe(" this week: Monday 2026-12-07 (UTC) is today");
    expect(spendPeriod(true, monday.week)).not.toContain("today (UTC day)");
    expect(spendPeriod(false, monday.today)).toBe(" today (2026-12-07, UTC day)");
    const wednesday = spendRanges(new Date("2026-12-09T14:00:00Z"));
    expect(spendPeriod(true, wednesday.week)).toBe(" this week, since Monday 2026-12-07 (UTC)");
  });


  it("takes today and the ISO week (Monday first) in UTC", () => {
    // Wednesday 2026-12-02 23:30 UTC; and a Sunday, whose week began six days before.
    expect(spendRanges(new Date("2026-12-02T23:30:00Z"))).toEqual({
      today: { since: "2026-12-02", until: "2026-12-02" }, week: { since: "2026-11-30", until: "2026-12-02" },
    });
    expect(spendRanges(new Date("2026-12-06T01:00:00Z")).week).toEqual({ since: "2026-11-30", until: "2026-12-06" });
    expect(spendRanges(new Date("2026-11-30T00:00:00Z")).week.since).toBe("2026-11-30");
  });

  it("links into the run list and the cost report", () => {
    expect(runsLink("failed", "2026-12-01T10:11:12Z")).toBe("/runs/?status=failed&from=2026-12-01");
    expect(runsLink("running", null)).toBe("/runs/?status=running");
    expect(costsLink({ since: "2026-11-30", until: "2026-12-02" })).toBe("/costs/?since=2026-11-30&until=2026-12-02");
  });

  it("shows a run's error as one short line", () => {
    expect(errorLine({ code: "node_failed", message: "division\n by zero" })).toBe("division by zero");
    expect(errorLine({ code: "budget_exceeded" })).toBe("budget_exceeded");
    expect(errorLine(null)).toBe("No error message was recorded.");
    expect(errorLine({ message: "x".repeat(300) }, 10)).toBe("xxxxxxxxx…");
  });
});
