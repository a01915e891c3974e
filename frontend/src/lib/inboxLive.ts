// The approvals inbox live over ws/approvals/ (approvals/consumers.py): a snapshot on every (re)connect, then items that arrive, change or leave.
// One socket per page, shared by whoever listens (the top bar's count on every page, the inbox on /approvals/).
import { useEffect, useRef, useState } from "react";
import type { Approval } from "../api/types";
import type { Connection, SocketLike } from "./liveEvents";

/** One message of ws/approvals/; ``snapshot`` (the count and the newest page) comes first after each (re)connect; ``approval.more`` says how many a burst left out. */
export type InboxMessage =
  | { type: "snapshot"; approvals: Approval[]; count?: number }
  | { type: "approval.pending" | "approval.changed" | "approval.closed"; approval: Approval }
  | { type: "approval.more"; count: number };

export interface InboxSocketOptions {
  onMessage: (message: InboxMessage) => void;
  onConnection?: (state: Connection) => void;
  connect?: (url: string) => SocketLike;
  url?: string;
  /** First reconnect delay and the cap, in ms; the delay doubles per failed try. */
  backoffMs?: number;
  maxBackoffMs?: number;
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (handle: unknown) => void;
}

const KINDS = new Set(["approval.pending", "approval.changed", "approval.closed"]);

/** The message in ``raw`` (a frame's text), or null when it is not one of ours. */
export function parseInboxMessage(raw: unknown): InboxMessage | null {
  let m: unknown;
  try {
    m = typeof raw === "string" ? JSON.parse(raw) : raw;
  } catch {
    return null;
  }
  if (!m || typeof m !== "object") return null;
  const msg = m as { type?: unknown; approvals?: unknown; approval?: unknown };
  if (msg.type === "snapshot" && Array.isArray(msg.approvals)) {
    const count = (m as { count?: unknown }).count;
    return { type: "snapshot", approvals: msg.approvals as Approval[], ...(typeof count === "number" ? { count } : {}) };
  }
  if (msg.type === "approval.more" && typeof (m as { count?: unknown }).count === "number") return { type: "approval.more", count: (m as { count: number }).count };
  if (typeof msg.type === "string" && KINDS.has(msg.type) && msg.approval && typeof msg.approval === "object" && typeof (msg.approval as Approval).id === "number") {
    return { type: msg.type as "approval.pending", approval: msg.approval as Approval };
  }
  return null;
}

/** One socket to ws/approvals/ that reconnects with backoff (0.5 s doubling to 10 s, reset once open); each reconnect brings a fresh snapshot, so nothing is missed. */
export class InboxSocket {
  private socket: SocketLike | null = null;
  private timer: unknown = null;
  private closed = false;
  private delay: number;
  private readonly o: Required<Omit<InboxSocketOptions, "onConnection">> & Pick<InboxSocketOptions, "onConnection">;

  constructor(options: InboxSocketOptions) {
    this.o = {
      onMessage: options.onMessage,
      onConnection: options.onConnection,
      connect: options.connect ?? ((url) => new WebSocket(url) as unknown as SocketLike),
      url: options.url ?? `${window.location.protocol === "https:" ? "wss:" : "ws:"}//${window.location.host}/ws/approvals/`,
      backoffMs: options.backoffMs ?? 500,
      maxBackoffMs: options.maxBackoffMs ?? 10_000,
      setTimer: options.setTimer ?? ((fn, ms) => setTimeout(fn, ms)),
      clearTimer: options.clearTimer ?? ((h) => clearTimeout(h as ReturnType<typeof setTimeout>)),
    };
    this.delay = this.o.backoffMs;
    this.open();
  }

  close(): void {
    this.closed = true;
    if (this.timer !== null) this.o.clearTimer(this.timer);
    this.timer = null;
    const s = this.socket;
    this.socket = null;
    s?.close();
    this.o.onConnection?.("closed");
  }

  private open(): void {
    if (this.closed) return;
    let socket: SocketLike;
    try {
      socket = this.o.connect(this.o.url);
    } catch {
      this.retry();
      return;
    }
    this.socket = socket;
    socket.onopen = () => {
      if (this.socket !== socket) return;
      this.delay = this.o.backoffMs;
      this.o.onConnection?.("open");
    };
    socket.onmessage = (ev) => {
      if (this.socket !== socket) return;
      const m = parseInboxMessage(ev.data);
      if (m) this.o.onMessage(m);
    };
    socket.onerror = () => undefined; // onclose follows
    socket.onclose = () => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.retry();
    };
  }

  private retry(): void {
    if (this.closed) return;
    this.o.onConnection?.("reconnecting");
    const wait = this.delay;
    this.delay = Math.min(this.delay * 2, this.o.maxBackoffMs);
    this.timer = this.o.setTimer(() => {
      this.timer = null;
      this.open();
    }, wait);
  }
}

/**
 * One inbox socket for any number of listeners on a page: opened with the first
 * subscriber, closed with the last. A listener that joins an open socket has missed its
 * snapshot: listeners treat every message as "the inbox changed" and read what they show
 * through the API (on mount, then on each message), so nothing depends on having seen it.
 */
export class SharedInbox {
  private socket: InboxSocket | null = null;
  private readonly listeners = new Set<(message: InboxMessage) => void>();
  private readonly connectionListeners = new Set<(state: Connection) => void>();
  private state: Connection = "connecting";

  constructor(private readonly make: (options: InboxSocketOptions) => InboxSocket = (o) => new InboxSocket(o)) {}

  /** The connection state now ("connecting" before the first subscriber). */
  get connection(): Connection {
    return this.state;
  }

  /** Be handed every message; opens the socket for the first subscriber. Returns the function that stops it. */
  subscribe(listener: (message: InboxMessage) => void): () => void {
    this.listeners.add(listener);
    if (!this.socket) {
      this.socket = this.make({
        onMessage: (m) => { for (const fn of [...this.listeners]) fn(m); },
        onConnection: (s) => this.setState(s),
      });
    }
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0 && this.socket) {
        const socket = this.socket;
        this.socket = null;
        socket.close();
        this.setState("connecting");
      }
    };
  }

  /** Listen to connection changes; returns the function that stops listening. */
  onConnectionChange(fn: (state: Connection) => void): () => void {
    this.connectionListeners.add(fn);
    return () => this.connectionListeners.delete(fn);
  }

  private setState(state: Connection): void {
    if (state === this.state) return;
    this.state = state;
    for (const fn of [...this.connectionListeners]) fn(state);
  }
}

let shared: SharedInbox | null = null;

/** The page's one inbox socket. */
export function sharedInbox(): SharedInbox {
  if (!shared) shared = new SharedInbox();
  return shared;
}

/**
 * Listen to the inbox live while mounted and ``enabled``, on the page's shared socket;
 * ``onMessage`` always sees the latest closure. Returns the connection state ("closed"
 * where the browser has no WebSocket or while not enabled: fall back to polling).
 */
export function useInboxLive(onMessage: (message: InboxMessage) => void, enabled = true, inbox: SharedInbox | null = null): Connection {
  const supported = typeof WebSocket !== "undefined" || inbox !== null;
  const [state, setState] = useState<Connection>(supported && enabled ? "connecting" : "closed");
  const fn = useRef(onMessage);
  fn.current = onMessage;
  useEffect(() => {
    if (!supported || !enabled) { setState("closed"); return; }
    const source = inbox ?? sharedInbox();
    const stopConnection = source.onConnectionChange(setState);
    const stop = source.subscribe((m) => fn.current(m));
    setState(source.connection);
    return () => { stop(); stopConnection(); };
  }, [supported, enabled, inbox]);
  return state;
}
