// The builder's help dialog: keyboard shortcuts and gestures of the canvas.
import { Fragment } from "react";
import { Dialog } from "./Dialog";

/**
 * One line of the shortcut help: ``keys`` are key combinations (each drawn as keycaps,
 * ``sep`` between them: "or" for alternatives, "/" when they pair with the "/"-separated
 * parts of ``what``), or ``gesture`` is a mouse action (drawn as text).
 */
export interface Shortcut { keys?: string[]; sep?: "or" | "/"; gesture?: string; what: string }

/** The builder's shortcut help, in the order a new user needs them. */
export const SHORTCUTS: Shortcut[] = [
  { gesture: "“+” beside a node's output", what: "pick a node to add after it, connected (type to search, arrows, Enter)" },
  { gesture: "Drag from an output and let go on empty canvas", what: "pick a node to add there, connected" },
  { gesture: "Drag a kind from the palette onto the canvas", what: "add a node" },
  { gesture: "Drag from a handle to another node's handle", what: "connect" },
  { gesture: "« and » on the palette and side panel", what: "hide or show them (more room for the canvas)" },
  { gesture: "Click · Shift+click · Shift+drag on empty canvas", what: "select · add to the selection · box-select" },
  { keys: ["Arrow keys", "Shift+Arrow keys"], sep: "/", what: "move the selection 5 / 20 px (each press one undo step)" },
  { keys: ["Delete", "Backspace"], sep: "or", what: "delete the selection" },
  { keys: ["Ctrl+C", "Ctrl+V"], sep: "/", what: "copy / paste (also between tabs)" },
  { keys: ["Ctrl+Z"], what: "undo" },
  { keys: ["Ctrl+Shift+Z", "Ctrl+Y"], sep: "or", what: "redo" },
  { keys: ["Ctrl+A"], what: "select all" },
  { keys: ["Shift+L"], what: "auto-layout" },
  { keys: ["F"], what: "fit the graph in view" },
  { keys: ["N"], what: "add a sticky note" },
  { keys: ["Escape"], what: "clear the selection, close dialogs" },
  { keys: ["?"], what: "this help" },
];

export function HelpDialog({ onClose }: { onClose: () => void }) {
  return (
    <Dialog title="Keyboard shortcuts" onClose={onClose}>
      <table className="shortcuts">
        <tbody>
          {[...SHORTCUTS, { keys: ["Ctrl+S"], what: "save the draft now (it also saves by itself)" }].map((s) => (
            <tr key={s.what}>
              <th scope="row">
                {s.gesture ?? s.keys?.map((k, i) => <Fragment key={k}>{i > 0 ? <span className="muted"> {s.sep ?? "or"} </span> : null}<kbd>{k}</kbd></Fragment>)}
              </th>
              <td>{s.what}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </Dialog>
  );
}
