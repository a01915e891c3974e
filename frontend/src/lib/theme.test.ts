import css from "../styles/app.css?raw";
import { contrast } from "./statusTokens";
import { THEME_KEY, applyTheme, nextTheme, readTheme, setTheme } from "./theme";

/** ``--name: light-dark(a, b)`` (or one colour for both) as styles/app.css declares it: [light, dark]. */
function token(name: string): [string, string] {
  const both = new RegExp(`--${name}: light-dark\\((#[0-9a-f]{6}), (#[0-9a-f]{6})\\);`).exec(css);
  if (both) return [both[1]!, both[2]!];
  const one = new RegExp(`--${name}: (#[0-9a-f]{6});`).exec(css);
  if (!one) throw new Error(`no token --${name}`);
  return [one[1]!, one[1]!];
}

describe("colour tokens", () => {
  it("give text WCAG AA contrast (4.5:1) on every surface, in both themes", () => {
    for (const text of ["text", "muted", "link", "danger-text", "warning-text", "success-text"]) {
      for (const surface of ["bg", "panel", "surface-2", "subtle"]) {
        for (const theme of [0, 1] as const) {
          const [fg, bg] = [token(text)[theme], token(surface)[theme]];
          expect(contrast(fg, bg), `${text} on ${surface} (${theme ? "dark" : "light"}): ${fg} on ${bg}`).toBeGreaterThanOrEqual(4.5);
        }
      }
    }
  });

  it("give a filled button's label AA contrast in both themes", () => {
    for (const fill of ["accent", "danger"]) {
      for (const theme of [0, 1] as const) expect(contrast("#ffffff", token(fill)[theme]), fill).toBeGreaterThanOrEqual(4.5);
    }
  });
});

describe("theme choice", () => {
  afterEach(() => { window.localStorage.clear(); document.documentElement.removeAttribute("data-theme"); });

  it("follows the system until a theme is chosen, then keeps the choice", () => {
    expect(readTheme()).toBe("system");
    setTheme("dark");
    expect(window.localStorage.getItem(THEME_KEY)).toBe("dark");
    expect(document.documentElement.getAttribute("data-theme")).toBe("dark");
    expect(readTheme()).toBe("dark");
    setTheme("system");
    expect(window.localStorage.getItem(THEME_KEY)).toBeNull();
    expect(document.documentElement.hasAttribute("data-theme")).toBe(false);
  });

  it("ignores a stored value it does not know, and cycles system, light, dark", () => {
    window.localStorage.setItem(THEME_KEY, "sepia");
    expect(readTheme()).toBe("system");
    applyTheme(readTheme());
    expect(document.documentElement.hasAttribute("data-theme")).toBe(false);
    expect([nextTheme("system"), nextTheme("light"), nextTheme("dark")]).toEqual(["light", "dark", "system"]);
  });
});
