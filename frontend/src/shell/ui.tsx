// Small UI primitives every page uses: loading, error, empty states, status badges, modal dialogs.
import { Fragment, useEffect, useId, useRef, type ReactNode } from "react";
import { ApiError } from "../lib/api";
import { statusLabel } from "./format";
import { statusClass } from "../lib/statusTokens";
import { epochMs, formatAgo, formatClock, formatDateTime, formatFromStart, useNow } from "../lib/time";
import { Button } from "./Button";
export { Skeleton } from "./Skeleton";

/** A spinner and a line for work in progress (a test, a refresh); a page or section waiting for its data shows a Skeleton. */
export function Loading({ label = "Loading…" }: { label?: string }) {
  return <div className="loading" role="status"><span className="spinner" aria-hidden="true" />{label}</div>;
}

/** An error from the API (its message and any field errors by path) or from the network. */
export function ErrorMessage({ error, title, onRetry }: { error: unknown; title?: string; onRetry?: () => void }) {
  const message = error instanceof Error ? error.message : String(error);
  const fields = error instanceof ApiError ? Object.entries(error.fields) : [];
  const offline = error instanceof TypeError;
  return (
    <div className="alert alert-error" role="alert">
      {title ? <strong>{title} </strong> : null}
      <span>{offline ? "The server could not be reached. Check your connection and try again." : message}</span>
      {fields.length > 0 ? (
        <ul className="field-errors">
          {fields.map(([path, messages]) => (
            <li key={path}><code>{path}</code>: {messages.join(" ")}</li>
          ))}
        </ul>
      ) : null}
      {onRetry ? <div><Button size="small" onClick={onRetry}>Try again</Button></div> : null}
    </div>
  );
}

/** What to show when a list has nothing in it: a title, a line of help and the actions that fill it. */
export function EmptyState({ title, children, actions }: { title: string; children?: ReactNode; actions?: ReactNode }) {
  return (
    <div className="empty">
      <div className="empty-title">{title}</div>
      {children ? <div className="empty-body">{children}</div> : null}
      {actions ? <div className="empty-actions">{actions}</div> : null}
    </div>
  );
}

/** What the live-connection line says for ``connection`` (a Connection of lib/liveEvents). */
export function liveLabel(connection: string, pollSeconds?: number): string {
  if (connection === "open") return "Live";
  if (connection === "closed") return "Not live";
  // A page that polls while its socket is down (a server without WebSockets never opens
  // one) says so, rather than "Reconnecting…" for ever while its data is in fact fresh.
  if (pollSeconds !== undefined) return `Refreshing every ${pollSeconds} s`;
  return connection === "reconnecting" ? "Reconnecting…" : "Connecting…";
}

/**
 * The "Live" / "Reconnecting…" line of a page fed by a WebSocket (a ``role="status"``
 * region, so screen readers hear it change). ``pollSeconds``: the page polls at that
 * interval while the socket is down, and once a connection failed the line says so.
 */
export function LiveStatus({ connection, pollSeconds }: { connection: string; pollSeconds?: number }) {
  // Only once a connection failed: the first "Connecting…" is usually a moment long.
  const polling = pollSeconds !== undefined && connection === "reconnecting";
  return (
    <span className={`live-dot live-${connection}`} role="status" title={polling ? "The live connection is not open: reconnecting in the background" : undefined}>
      {liveLabel(connection, polling ? pollSeconds : undefined)}
    </span>
  );
}

/**
 * A time as the run pages show it: the clock to the millisecond ("20:31:05.123", local time;
 * ``date``: with the day, before it or, with ``ago``, after it), then, muted, where it falls from ``origin`` ("+1.250 s
 * from run start", written "+1.250 s" when ``short``) or, with ``ago``, how long ago (ticking
 * each second). The full date and both readings are in its title. "—" when missing.
 */
export function When({ at, origin, ago: showAgo = false, date = false, short = false }: { at: string | null | undefined; origin?: string | null; ago?: boolean; date?: boolean; short?: boolean }) {
  const now = useNow(showAgo ? 1000 : null);
  if (epochMs(at) === null) return <>—</>;
  const from = origin ? formatFromStart(at, origin) : "";
  const ago = showAgo ? formatAgo(at, now) : "";
  const full = formatDateTime(at);
  // With "ago" the day moves under the clock (a narrow fact column); alone it leads the clock on one line (a table).
  const extra = showAgo ? (date ? `${full.slice(0, 10)} · ${ago}` : ago) : short ? from.replace(/ from run start$/, "") : from;
  // "2026-12-07 · 5 min ago" may wrap between its parts in a narrow column, never inside a date or an "ago".
  const parts = extra.split(" · ");
  return (
    <span className="when">
      <time dateTime={at ?? undefined} title={[full, from, ago].filter(Boolean).join(" · ")} className="nowrap">{date && !showAgo ? full : formatClock(at)}</time>
      {extra ? <> <span className="muted small when__rel">{parts.map((p, i) => <Fragment key={i}>{i > 0 ? " · " : ""}<span className="nowrap">{p}</span></Fragment>)}</span></> : null}
    </span>
  );
}

/** A status (a run's, step's, attempt's, request's, worker's) as a badge in its token's colours (lib/statusTokens). */
export function StatusBadge({ status, label }: { status: string; label?: string }) {
  return <span className={`badge status-badge ${statusClass(status)}`}>{label ?? statusLabel(status)}</span>;
}

/**
 * A modal dialog: focus moves into it, Tab stays inside, Escape or the backdrop closes it,
 * and focus returns to what had it before. ``children`` is the body, ``footer`` the buttons.
 */
export function Modal({ title, onClose, children, footer }: { title: string; onClose: () => void; children: ReactNode; footer?: ReactNode }) {
  const ref = useRef<HTMLDivElement>(null);
  const titleId = useId();
  useEffect(() => {
    const before = document.activeElement as HTMLElement | null;
    const el = ref.current;
    const first = el?.querySelector<HTMLElement>("[autofocus], input, textarea, select, button");
    (first ?? el)?.focus();
    return () => before?.focus();
  }, []);
  // Escape closes from anywhere (focus may have left with a button that was removed).
  const close = useRef(onClose);
  close.current = onClose;
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (e.key === "Escape") close.current();
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, []);
  const onKeyDown = (e: React.KeyboardEvent) => {
    if (e.key !== "Tab" || !ref.current) return;
    const focusable = [...ref.current.querySelectorAll<HTMLElement>("a[href], button:not([disabled]), input, textarea, select")];
    if (focusable.length === 0) return;
    const first = focusable[0]!;
    const last = focusable[focusable.length - 1]!;
    if (e.shiftKey && document.activeElement === first) {
      e.preventDefault();
      last.focus();
    } else if (!e.shiftKey && document.activeElement === last) {
      e.preventDefault();
      first.focus();
    }
  };
  return (
    <div className="modal-backdrop" onMouseDown={(e) => { if (e.target === e.currentTarget) onClose(); }}>
      <div className="modal nokey" role="dialog" aria-modal="true" aria-labelledby={titleId} ref={ref} tabIndex={-1} onKeyDown={onKeyDown}>
        <h2 id={titleId} className="modal-title">{title}</h2>
        <div className="modal-body">{children}</div>
        {footer ? <div className="modal-footer">{footer}</div> : null}
      </div>
    </div>
  );
}

/** A page's heading row: title, an optional line under it, and actions on the right. */
export function PageHeader({ title, subtitle, actions }: { title: ReactNode; subtitle?: ReactNode; actions?: ReactNode }) {
  return (
    <div className="page-header">
      <div>
        <h1>{title}</h1>
        {subtitle ? <p className="muted page-subtitle">{subtitle}</p> : null}
      </div>
      {actions ? <div className="page-actions">{actions}</div> : null}
    </div>
  );
}
