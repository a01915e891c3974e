// The approvals inbox live over ws/approvals/ (approvals/consumers.py): a snapshot on every (re)connect, then items that arrive, change or leave.
import { useEffect, useRef, useState } from "react";
import type { Approval } from "../shell/types";
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

/** Listen to the inbox live while mounted; ``onMessage`` always sees the latest closure. Returns the connection state. */
export function useInboxLive(onMessage: (message: InboxMessage) => void): Connection {
  const [state, setState] = useState<Connection>("connecting");
  const fn = useRef(onMessage);
  fn.current = onMessage;
  useEffect(() => {
    if (typeof WebSocket === "undefined") return;
    const socket = new InboxSocket({ onMessage: (m) => fn.current(m), onConnection: setState });
    return () => socket.close();
  }, []);
  return state;
}
