// "Test data" in the node panel: the state pinned for this node (kept beside the draft), pinned from its last input or written as JSON; unpin.
import { useState } from "react";
import { ApiError } from "../../lib/api";
import { JsonValueEditor } from "../editors/JsonValueEditor";
import { pinNode, unpinNode } from "../run/pins";
import { displayValue } from "./format";
import type { TestData } from "./useTestData";
import { Button } from "../../shell/Button";

interface Props {
  graphId: number;
  nodeId: string;
  data: TestData;
  /** A starting point for "Write data" when nothing is known yet (the test form's initial state). */
  blank: Record<string, unknown>;
}

function PinIcon() {
  return (
    <svg className="pin-icon" viewBox="0 0 16 16" width="14" height="14" aria-hidden="true">
      <path fill="currentColor" d="M10.5 1.5 14.5 5.5 13 6.2 10.9 8.3 11.2 12 9.9 13.3 6.8 10.2 3 14 2 14 2 13 5.8 9.2 2.7 6.1 4 4.8 7.7 5.1 9.8 3z" />
    </svg>
  );
}

/**
 * Pinned: the data, Edit (a JSON editor, saved with Save) and Unpin. Not pinned: Pin the last
 * input (when there is one) or write data as JSON. Saving goes to the server at once: a pin
 * is not part of the draft's undo history.
 */
export function NodePin({ graphId, nodeId, data, blank }: Props) {
  const [editing, setEditing] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const isEditing = editing !== undefined;
  const editOk = typeof editing === "object" && editing !== null && !Array.isArray(editing);

  async function act(what: () => Promise<void>) {
    setBusy(true);
    setError(null);
    try {
      await what();
      setEditing(undefined);
    } catch (err) {
      const fields = err instanceof ApiError ? (err.body?.error as { fields?: Record<string, string[]> } | undefined)?.fields : undefined;
      setError(fields?.data?.join(" ") ?? (err instanceof Error ? err.message : String(err)));
    } finally {
      setBusy(false);
    }
  }

  return (
    <section className={`panel-section node-pin${data.pinned ? " node-pin--pinned" : ""}`} aria-label="Test data">
      <div className="node-pin__head">
        <h3>{data.pinned && <PinIcon />} Test data</h3>
        <span className="node-pin__source">{data.pinned ? "Pinned: kept with the draft" : data.state ? `From the ${data.label}` : "None yet"}</span>
      </div>
      {isEditing ? (
        <>
          <JsonValueEditor id={`pin-${nodeId}`} value={editing} onChange={setEditing} label="Pinned test data" />
          {!editOk && <p className="field-errors">Test data must be a JSON object (the state the node sees).</p>}
          <div className="button-row">
            <Button variant="primary" disabled={!editOk || busy} onClick={() => void act(() => pinNode(graphId, nodeId, editing as Record<string, unknown>))}>Save pin</Button>
            <Button onClick={() => { setEditing(undefined); setError(null); }}>Cancel</Button>
          </div>
        </>
      ) : (
        <>
          {data.pinned && <pre className="test-output node-pin__data" aria-label="Pinned data">{displayValue(data.state)}</pre>}
          <div className="button-row">
            {!data.pinned && data.state && (
              <Button variant="primary" disabled={busy} onClick={() => void act(() => pinNode(graphId, nodeId, data.state!))}>
                <PinIcon /> Pin {data.label}
              </Button>
            )}
            <Button onClick={() => setEditing(data.state ?? blank)}>{data.pinned ? "Edit" : "Write data"}</Button>
            {data.pinned && <Button disabled={busy} onClick={() => void act(() => unpinNode(graphId, nodeId))}>Unpin</Button>}
          </div>
        </>
      )}
      {error && <p className="panel-error" role="alert">{error}</p>}
      {!isEditing && (
        <p className="field-help">{data.pinned ? "Test node starts from it and the fields below preview their values against it." : "Pin data to test this node and preview its fields with the same state every time, also after a reload."}</p>
      )}
    </section>
  );
}
