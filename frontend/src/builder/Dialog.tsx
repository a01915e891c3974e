// A modal dialog (native <dialog>): focus stays inside, Escape closes it.
import { useEffect, useRef, type ReactNode } from "react";

/** ``onClose`` null: the dialog must be answered (no close button, Escape does nothing). */
export function Dialog({ title, onClose, children, wide }: { title: string; onClose: (() => void) | null; children: ReactNode; wide?: boolean }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal?.();
    return () => d?.close?.();
  }, []);
  return (
    <dialog ref={ref} className={`dialog${wide ? " dialog--wide" : ""}`} aria-label={title} role="dialog"
      onCancel={(e) => { e.preventDefault(); onClose?.(); }}>
      <header className="dialog__head">
        <h2>{title}</h2>
        {onClose && <button type="button" className="icon-button" aria-label="Close" onClick={onClose}>×</button>}
      </header>
      <div className="dialog__body">{children}</div>
    </dialog>
  );
}
