// A modal that asks before a destructive call (remove a provider or an MCP server, revoke a token): "Keep it" or the action, its error shown in place.
import { useState, type ReactNode } from "react";
import { Button } from "./Button";
import { ErrorMessage, Modal } from "./ui";

/**
 * Ask, then ``act()`` (an API call returning a promise). On success ``onDone()`` (the caller
 * reloads and closes); on failure the error shows in the dialog and the action can be tried
 * again. ``action`` names the button ("Remove provider"), ``busy`` its label while the call runs
 * ("Removing…"); ``children`` say what the action does.
 */
export function ConfirmDialog({ title, action, busy: busyLabel, act, onClose, onDone, children }: {
  title: string;
  action: string;
  busy: string;
  act: () => Promise<unknown>;
  onClose: () => void;
  onDone: () => void;
  children: ReactNode;
}) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const run = async () => {
    setBusy(true);
    setError(null);
    try {
      await act();
      onDone();
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  return (
    <Modal title={title} onClose={onClose} footer={
      <>
        <Button onClick={onClose}>Keep it</Button>
        <Button variant="danger" onClick={() => void run()} disabled={busy}>{busy ? busyLabel : action}</Button>
      </>
    }>
      {children}
      {error ? <ErrorMessage error={error} /> : null}
    </Modal>
  );
}
