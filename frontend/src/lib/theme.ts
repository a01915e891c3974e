// The colour theme: the system's (prefers-color-scheme) unless the top bar's switch chose light or dark, kept in localStorage.

/** What the user chose: follow the system, or a fixed theme. */
export type ThemeChoice = "system" | "light" | "dark";

/** The localStorage key holding the choice ("light" or "dark"; absent: follow the system). */
export const THEME_KEY = "ballast.theme";

/** The stored choice; "system" when none is stored or storage is unavailable (a private window may refuse it). */
export function readTheme(): ThemeChoice {
  try {
    const v = window.localStorage.getItem(THEME_KEY);
    return v === "light" || v === "dark" ? v : "system";
  } catch {
    return "system";
  }
}

/**
 * Put ``choice`` on the page: ``data-theme`` on <html> for a fixed theme (styles/app.css sets
 * ``color-scheme`` from it, and every token's light-dark() follows), none for the system's.
 */
export function applyTheme(choice: ThemeChoice, root: HTMLElement = document.documentElement): void {
  if (choice === "system") root.removeAttribute("data-theme");
  else root.setAttribute("data-theme", choice);
}

/** Store ``choice`` (removing the key for "system") and apply it. */
export function setTheme(choice: ThemeChoice): void {
  try {
    if (choice === "system") window.localStorage.removeItem(THEME_KEY);
    else window.localStorage.setItem(THEME_KEY, choice);
  } catch {
    // Storage refused: the choice holds for this page only.
  }
  applyTheme(choice);
}

/** The switch's order: system -> light -> dark -> system. */
export function nextTheme(choice: ThemeChoice): ThemeChoice {
  return choice === "system" ? "light" : choice === "light" ? "dark" : "system";
}
