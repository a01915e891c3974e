// The top bar on every page of a signed-in user: logo -> home, Graphs, Runs, Approvals (with the count waiting), Costs, Audit (staff), Workers (staff, operators), Users and Providers (staff), Admin (staff), user menu (API tokens, password, sign out).
import { useCallback, useEffect, useRef, useState } from "react";
import { api } from "../lib/api";
import { usePageContext } from "../lib/context";
import { useInboxLive, type SharedInbox } from "../lib/inboxLive";
import { useDebounced } from "../lib/useLiveEvents";
import type { InboxCounts } from "../api/types";
import { nextTheme, readTheme, setTheme, type ThemeChoice } from "../lib/theme";

/** A window event a page fires after it decided or claimed something: the top bar counts again at once. */
export const APPROVALS_CHANGED = "ballast:approvals-changed";

/** How often (ms) the top bar asks how many approvals wait for the user while the inbox socket is not open. */
export const WAITING_POLL_MS = 15000;
/** A burst of inbox messages (a fan-out reaching several gates) costs one count. */
export const WAITING_DEBOUNCE_MS = 250;

/**
 * The number of approvals waiting for the signed-in user (assigned, or unclaimed in their
 * groups); null until known. Read once, then again whenever the page's inbox socket
 * (ws/approvals/, shared with the inbox page) says a request arrived, changed or left (a
 * run reached a gate, someone decided, a run was cancelled) and when a page says it
 * decided something (APPROVALS_CHANGED). Polled every WAITING_POLL_MS only while that
 * socket is not open (a server without WebSockets, a drop) or for a user who decides no
 * approvals (``live`` false: no socket for them).
 */
export function useWaitingCount(enabled: boolean, live = true, inbox: SharedInbox | null = null): number | null {
  const [waiting, setWaiting] = useState<number | null>(null);
  const seq = useRef(0);
  const load = useCallback(() => {
    const id = ++seq.current; // an older answer arriving late never overwrites a newer one
    api<InboxCounts>("approvals/inbox/counts/").then((c) => { if (id === seq.current) setWaiting(c.waiting); }).catch(() => undefined);
  }, []);
  const changed = useDebounced(load, WAITING_DEBOUNCE_MS);
  const connection = useInboxLive(changed, enabled && live, inbox);
  useEffect(() => {
    if (!enabled) return;
    const answers = seq; // the counter, not a DOM node: the cleanup bumps it so a late answer is dropped
    load();
    window.addEventListener(APPROVALS_CHANGED, load);
    return () => { answers.current++; window.removeEventListener(APPROVALS_CHANGED, load); };
  }, [enabled, load]);
  useEffect(() => {
    if (!enabled || connection === "open") return;
    const timer = window.setInterval(load, WAITING_POLL_MS);
    return () => window.clearInterval(timer);
  }, [enabled, connection, load]);
  return waiting;
}

/** Which nav link is current for ``path``: the longest link prefix, "/" only for itself. */
export function activeSection(path: string, links: { href: string }[]): string | null {
  let best: string | null = null;
  for (const { href } of links) {
    const match = href === "/" ? path === "/" : path === href || path.startsWith(href);
    if (match && (best === null || href.length > best.length)) best = href;
  }
  return best;
}

export function TopBar({ path = window.location.pathname }: { path?: string }) {
  const ctx = usePageContext();
  const user = ctx.user;
  const waiting = useWaitingCount(user !== null, user?.can.approve ?? false);
  if (user === null) return null;
  const urls = ctx.urls;
  const links = [
    { href: urls.graphs ?? "/graphs/", label: "Graphs" },
    { href: urls.runs ?? "/runs/", label: "Runs" },
    { href: urls.approvals ?? "/approvals/", label: "Approvals" },
    { href: urls.costs ?? "/costs/", label: "Costs" },
    ...(user.can.audit ? [{ href: urls.audit ?? "/audit/", label: "Audit" }] : []),
    ...(user.can.workers ? [{ href: urls.workers ?? "/workers/", label: "Workers" }] : []),
    ...(user.can.admin ? [{ href: urls.users ?? "/users/", label: "Users" }, { href: urls.providers ?? "/providers/", label: "Providers" }, { href: urls.mcp_servers ?? "/mcp-servers/", label: "MCP servers" }] : []),
  ];
  const current = activeSection(path, links);
  return (
    <header className="topbar">
      <a className="brand" href={urls.home ?? "/"}>
        <span className="brand-mark" aria-hidden="true">B</span>Ballast
      </a>
      <MainNav waiting={waiting}>
        {links.map((l) => (
          <a key={l.href} href={l.href} className="topnav-link" aria-current={current === l.href ? "page" : undefined}>
            {l.label}
            {l.label === "Approvals" && waiting ? <span className="topnav-count" aria-label={`${waiting} waiting for you`}>{waiting}</span> : null}
          </a>
        ))}
        {user.can.admin ? <a href={urls.admin ?? "/admin/"} className="topnav-link">Admin</a> : null}
      </MainNav>
      <div className="topbar-spacer" />
      <ThemeSwitch />
      <UserMenu />
    </header>
  );
}

/**
 * The main navigation: a row of links from 900 px up; below, a "Menu" button that opens them
 * as a list under the bar (Escape or a click elsewhere closes it). The button carries the
 * approvals ``waiting`` count too: folded into the menu, the Approvals link's count is unseen.
 */
function MainNav({ children, waiting }: { children: React.ReactNode; waiting: number | null }) {
  const [open, setOpen] = useState(false);
  const wrap = useRef<HTMLDivElement>(null);
  useEffect(() => {
    if (!open) return;
    const onDown = (e: MouseEvent) => { if (wrap.current && !wrap.current.contains(e.target as Node)) setOpen(false); };
    const onKey = (e: KeyboardEvent) => { if (e.key === "Escape") setOpen(false); };
    document.addEventListener("mousedown", onDown);
    document.addEventListener("keydown", onKey);
    return () => { document.removeEventListener("mousedown", onDown); document.removeEventListener("keydown", onKey); };
  }, [open]);
  return (
    <div className="topnav-wrap" ref={wrap}>
      <button type="button" className="topbar-icon menu-toggle" aria-expanded={open} aria-controls="main-nav" onClick={() => setOpen((o) => !o)}
        aria-label={waiting ? `Menu, ${waiting} approval${waiting === 1 ? "" : "s"} waiting` : undefined}>
        <span aria-hidden="true">☰</span> Menu
        {waiting ? <span className="topnav-count menu-toggle__count" aria-hidden="true">{waiting}</span> : null}
      </button>
      <nav aria-label="Main" id="main-nav" className={open ? "topnav topnav--open" : "topnav"}>{children}</nav>
    </div>
  );
}

const THEME_LABELS: Record<ThemeChoice, string> = { system: "System theme", light: "Light theme", dark: "Dark theme" };
const THEME_ICONS: Record<ThemeChoice, string> = { system: "◐", light: "☀", dark: "☾" };

/** The theme switch: system -> light -> dark (lib/theme; the choice is kept in localStorage). */
export function ThemeSwitch() {
  const [choice, setChoice] = useState<ThemeChoice>(readTheme);
  const next = nextTheme(choice);
  return (
    <button type="button" className="topbar-icon theme-switch" title={`${THEME_LABELS[choice]}: switch to ${THEME_LABELS[next].toLowerCase()}`}
      aria-label={`${THEME_LABELS[choice]} (switch to ${THEME_LABELS[next].toLowerCase()})`}
      onClick={() => { setTheme(next); setChoice(next); }}>
      <span aria-hidden="true">{THEME_ICONS[choice]}</span>
    </button>
  );
}

/** The signed-in user's menu: who they are, their roles, change password, sign out (a POST). */
export function UserMenu() {
  const ctx = usePageContext();
  const user = ctx.user!;
  const [open, setOpen] = useState(false);
  const wrap = useRef<HTMLDivElement>(null);
  const button = useRef<HTMLButtonElement>(null);

  useEffect(() => {
    if (!open) return;
    const onDown = (e: MouseEvent) => {
      if (wrap.current && !wrap.current.contains(e.target as Node)) setOpen(false);
    };
    document.addEventListener("mousedown", onDown);
    wrap.current?.querySelector<HTMLElement>("[role=menuitem]")?.focus();
    return () => document.removeEventListener("mousedown", onDown);
  }, [open]);

  const onKeyDown = (e: React.KeyboardEvent) => {
    if (e.key === "Escape" && open) {
      setOpen(false);
      button.current?.focus();
    }
    if ((e.key === "ArrowDown" || e.key === "ArrowUp") && open && wrap.current) {
      e.preventDefault();
      const items = [...wrap.current.querySelectorAll<HTMLElement>("[role=menuitem]")];
      const at = items.indexOf(document.activeElement as HTMLElement);
      const next = (at + (e.key === "ArrowDown" ? 1 : -1) + items.length) % items.length;
      items[next]?.focus();
    }
  };
  const roles = user.is_staff ? ["staff"] : user.groups;
  return (
    <div className="usermenu" ref={wrap} onKeyDown={onKeyDown}>
      <button ref={button} type="button" className="usermenu-button" aria-haspopup="menu" aria-expanded={open}
        onClick={() => setOpen((o) => !o)}>
        <span className="avatar" aria-hidden="true">{user.display_name.slice(0, 1).toUpperCase()}</span>
        <span className="usermenu-name">{user.display_name}</span>
        <span aria-hidden="true" className="caret">▾</span>
      </button>
      {open ? (
        <div className="usermenu-panel" role="menu" aria-label="Account">
          <div className="usermenu-who">
            <div className="usermenu-username">{user.username}</div>
            <div className="muted">{roles.length ? roles.join(", ") : "no role yet: you can look, not change"}</div>
          </div>
          <a role="menuitem" className="menuitem" href={ctx.urls.tokens ?? "/tokens/"}>API tokens</a>
          <a role="menuitem" className="menuitem" href={ctx.urls.password_change ?? "/accounts/password_change/"}>Change password</a>
          <form method="post" action={ctx.urls.logout ?? "/accounts/logout/"}>
            <input type="hidden" name="csrfmiddlewaretoken" value={ctx.csrf_token} />
            <button role="menuitem" type="submit" className="menuitem">Sign out</button>
          </form>
        </div>
      ) : null}
    </div>
  );
}
