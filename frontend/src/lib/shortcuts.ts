// The one guard every keyboard shortcut passes: none fires while a dialog is open or a field or editor has focus.

/** The selector of an open dialog (the builder's native <dialog>, the shell's Modal, any aria-modal). */
const OPEN_DIALOG = "dialog[open], [role=dialog], [aria-modal=true]";

/**
 * True when ``target`` is a place where keys mean text: an input, a textarea, a select, a
 * contenteditable element, a CodeMirror editor, or anything marked ``.nokey`` (React Flow's
 * own opt-out). Its own undo, copy and paste apply there.
 */
export function inTextField(target: EventTarget | null): boolean {
  const el = target as HTMLElement | null;
  if (!el || !el.tagName) return false;
  return el.isContentEditable
    || el.getAttribute?.("contenteditable") === "true"
    || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName)
    || !!el.closest?.(".cm-editor, [contenteditable=true], .nokey");
}

/** True while a modal dialog is open anywhere on the page. */
export function dialogOpen(): boolean {
  return document.querySelector(OPEN_DIALOG) !== null;
}

/**
 * True when a page's keyboard shortcut must ignore ``e``: a dialog is open, or the key went
 * to (or focus is in) a field or an editor. Every shortcut handler returns early on it.
 */
export function shortcutsBlocked(e: Pick<Event, "target">): boolean {
  return dialogOpen() || inTextField(e.target) || inTextField(document.activeElement);
}
