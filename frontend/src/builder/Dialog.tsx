// A modal dialog (native <dialog>): focus stays inside, Escape closes it.
import { useEffect, useRef, type ReactNode } from "react";
import { Button } from "../shell/Button";

/** The fields a dialog opens on, in document order: the first one found takes the focus. */
const FIRST_FIELD = ".dialog__body :is(input:not([type=hidden]):not([disabled]), textarea:not([disabled]), select:not([disabled]), [contenteditable=true])";

/** ``onClose`` null: the dialog must be answered (no close button, Escape does nothing). */
export function Dialog({ title, onClose, children, wide }: { title: string; onClose: (() => void) | null; children: ReactNode; wide?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal?.();
    // showModal() focuses the first focusable element, the header's close button, so a key
    // typed into a dialog with a field (Space in "What changed?") would close it: its first
    // field takes the focus instead.
    d?.querySelector<HTMLElement>(FIRST_FIELD)?.focus();
    return () => d?.close?.();
  }, []);
  return (
    <dialog ref={ref} className={`dialog nokey${wide ? " dialog--wide" : ""}`} aria-label={title} role="dialog"
      onCancel={(e) => { e.preventDefault(); onClose?.(); }}>
      <header className="dialog__head">
        <h2>{title}</h2>
        {onClose && <Button variant="ghost" icon aria-label="Close" onClick={onClose}>×</Button>}
      </header>
      <div className="dialog__body">{children}</div>
    </dialog>
  );
}
