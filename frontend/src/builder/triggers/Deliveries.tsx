// A webhook's last deliveries in the Triggers panel, polled while shown; a captured payload can be pinned as test input.
import type { Delivery, Page } from "../../api/types";
import { useEffect, useState } from "react";
import { api } from "../../lib/api";
import { timeAgo } from "../versions/VersionsPanel";
import { deliveryOutcome, failureText, POLL_MS } from "./webhooks";
import { Button } from "../../shell/Button";

const DELIVERIES_SHOWN = 10;

/** The webhook's latest deliveries, refreshed every two seconds while shown; a captured one can be pinned again. */
export function Deliveries({ base, onPin }: { base: string; onPin?: (payload: Record<string, unknown> | null) => void }) {
  const [rows, setRows] = useState<Delivery[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    let timer = 0;
    const load = async () => {
      try {
        const page = await api<Page<Delivery>>(`${base}deliveries/?page_size=${DELIVERIES_SHOWN}`);
        if (live) { setRows(page.results); setError(null); }
      } catch (err) {
        if (live) setError(failureText(err));
      }
      if (live) timer = window.setTimeout(() => void load(), POLL_MS * 2);
    };
    void load();
    return () => { live = false; window.clearTimeout(timer); };
  }, [base]);
  if (error && rows === null) return <p className="panel-error" role="alert">Could not load the deliveries: {error}</p>;
  if (rows === null) return <p className="panel-empty" role="status">Loading deliveries…</p>;
  if (rows.length === 0) return <p className="panel-empty">No deliveries yet.</p>;
  return (
    <table className="deliveries" aria-label="Recent deliveries">
      <thead>
        <tr><th scope="col">When</th><th scope="col">Status</th><th scope="col">Outcome</th></tr>
      </thead>
      <tbody>
        {rows.map((d) => (
          <tr key={d.id}>
            <td><time dateTime={d.received_at} title={`${new Date(d.received_at).toLocaleString()}${d.delivery_id ? ` · id ${d.delivery_id}` : ""}`}>{timeAgo(d.received_at)}</time></td>
            <td><span className={`badge ${d.status_code < 300 ? "badge-ok" : "badge-bad"}`}>{d.status_code}</span></td>
            <td>
              {d.run !== null ? <a href={`/runs/${d.run}/`}>{deliveryOutcome(d)}</a> : <span className="muted">{deliveryOutcome(d)}</span>}
              {d.payload && onPin && (
                <>{" "}<Button variant="link" title="Pin this delivery's input as the draft's test input" onClick={() => onPin(d.payload)}>Pin input</Button></>
              )}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
