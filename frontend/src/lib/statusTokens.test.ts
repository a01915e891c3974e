import css from "../styles/status.css?raw";
import { STATUS_TOKENS, contrast, statusClass, statusKey, type StatusKey } from "./statusTokens";

/** ``--status-<key>[-text|-bg]`` as styles/status.css declares it: one colour, or [light, dark] from ``light-dark(a, b)``. */
function cssValue(name: string): string | string[] | undefined {
  const one = new RegExp(`${name}:\\s*(#[0-9a-f]{6});`).exec(css);
  if (one) return one[1];
  const both = new RegExp(`${name}:\\s*light-dark\\((#[0-9a-f]{6}), (#[0-9a-f]{6})\\);`).exec(css);
  return both ? [both[1]!, both[2]!] : undefined;
}

describe("status tokens", () => {
  const keys = Object.keys(STATUS_TOKENS) as StatusKey[];

  it("are the same values in the TypeScript map and the CSS custom properties", () => {
    for (const key of keys) {
      const t = STATUS_TOKENS[key];
      expect([cssValue(`--status-${key}`), cssValue(`--status-${key}-text`), cssValue(`--status-${key}-bg`)]).toEqual([t.accent, [t.text, t.darkText], [t.bg, t.darkBg]]);
      expect(css).toContain(`.status-${key} { --status: var(--status-${key});`);
    }
  });

  it("give badge text at least WCAG AA contrast (4.5:1) on its background, and on the panel, in both themes", () => {
    for (const key of keys) {
      const t = STATUS_TOKENS[key];
      expect(contrast(t.text, t.bg), `${key}: ${t.text} on ${t.bg}`).toBeGreaterThanOrEqual(4.5);
      expect(contrast(t.text, "#ffffff"), `${key}: ${t.text} on white`).toBeGreaterThanOrEqual(4.5);
      expect(contrast(t.darkText, t.darkBg), `${key}: ${t.darkText} on ${t.darkBg}`).toBeGreaterThanOrEqual(4.5);
      expect(contrast(t.darkText, "#161b22"), `${key}: ${t.darkText} on the dark panel`).toBeGreaterThanOrEqual(4.5);
    }
  });

  it("compute contrast as WCAG 2 does", () => {
    expect(contrast("#000000", "#ffffff")).toBeCloseTo(21, 5);
    expect(contrast("#777777", "#ffffff")).toBeCloseTo(4.48, 2);
    expect(contrast("#ffffff", "#ffffff")).toBe(1);
  });

  it("give each node state a colour of its own", () => {
    const states: StatusKey[] = ["pending", "running", "retrying", "waiting", "parked", "interrupted", "succeeded", "failed", "cancelled", "skipped", "kept"];
    expect(new Set(states.map((s) => STATUS_TOKENS[s].accent)).size).toBe(states.length);
  });

  it("map every status the app shows to a token", () => {
    expect(statusKey("queued")).toBe("pending");
    expect(statusKey("waiting_at_approval")).toBe("waiting");
    expect(statusKey("waiting_for_decision")).toBe("parked");
    expect(statusKey("lost")).toBe("failed");
    expect(statusKey("approved")).toBe("succeeded");
    expect(statusKey("rejected")).toBe("failed");
    expect(statusKey("canceled")).toBe("cancelled");
    expect(statusKey("suspended")).toBe("running");
    expect(statusKey("something new")).toBe("neutral");
    expect(statusClass("interrupted")).toBe("status-interrupted");
  });
});
