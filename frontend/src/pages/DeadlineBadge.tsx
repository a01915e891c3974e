// A request's deadline as a badge that counts down (useNow ticks while one is shown): the inbox list and the open request.
import type { Approval } from "../api/types";
import { useEffect, useState } from "react";
import { deadlineState } from "./inbox";

/** The time now (ms), ticking every second while some item on screen counts down to a deadline. */
export function useNow(active: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!active) return;
    const timer = window.setInterval(() => setNow(Date.now()), 1000);
    return () => window.clearInterval(timer);
  }, [active]);
  return now;
}

export function DeadlineBadge({ item, now }: { item: Approval; now: number }) {
  const d = deadlineState(item, now);
  if (!d) return null;
  return <span className={`badge inbox-deadline inbox-deadline-${d.tone}`} title={d.detail}>{d.label}</span>;
}
