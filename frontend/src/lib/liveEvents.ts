// Live run events over one WebSocket (ws/runs/, runs/live/consumers.py): follow runs from the last seq seen,
import type { RunEvent } from "../api/types";
// reconnect with backoff, and hand each event over exactly once, in seq order.

/** The part of a browser WebSocket the stream uses (a fake one in unit tests). */
export interface SocketLike {
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: unknown) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(data: string): void;
  close(): void;
}

export type Connection = "connecting" | "open" | "reconnecting" | "closed";

export interface StreamOptions {
  /** Opens a socket to ``url`` (default: the browser's WebSocket). */
  connect?: (url: string) => SocketLike;
  /** The socket's URL (default: ws(s)://<this host>/ws/runs/). */
  url?: string;
  /** First reconnect delay and the cap, in ms; the delay doubles per failed try. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** Told when the connection state changes (to show "reconnecting…"). */
  onConnection?: (state: Connection) => void;
  /** Timers (fake ones in unit tests). */
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (handle: unknown) => void;
}

type Listener = (events: RunEvent[]) => void;

interface Followed {
  after: number;
  listeners: Set<Listener>;
}

function defaultUrl(): string {
  const proto = window.location.protocol === "https:" ? "wss:" : "ws:";
  return `${proto}//${window.location.host}/ws/runs/`;
}

function isEvent(value: unknown): value is RunEvent {
  if (!value || typeof value !== "object") return false;
  const e = value as Partial<RunEvent>;
  return typeof e.seq === "number" && typeof e.run === "number" && typeof e.kind === "string";
}

/**
 * One socket for any number of runs. ``follow(run, after, listener)`` gets every event of
 * ``run`` with seq > ``after``: the server sends the backlog from the database, then new
 * events as they commit. After a drop the stream reconnects (backoff 0.5 s doubling to
 * 10 s, reset once open) and follows every run again from the last seq it handed over,
 * so nothing is lost; an event at or below that seq is a duplicate and is dropped, and
 * one that skips a seq makes the stream ask again from the last one (the server fills in).
 */
export class RunEventStream {
  private readonly runs = new Map<number, Followed>();
  private readonly connectionListeners = new Set<(state: Connection) => void>();
  private readonly newRunListeners = new Set<() => void>();
  private socket: SocketLike | null = null;
  private timer: unknown = null;
  private delay: number;
  private closed = false;
  private state: Connection = "connecting";
  private readonly opts: Required<Omit<StreamOptions, "onConnection">> & Pick<StreamOptions, "onConnection">;

  constructor(options: StreamOptions = {}) {
    this.opts = {
      connect: options.connect ?? ((url) => new WebSocket(url) as unknown as SocketLike),
      url: options.url ?? defaultUrl(),
      backoffMs: options.backoffMs ?? 500,
      maxBackoffMs: options.maxBackoffMs ?? 10_000,
      onConnection: options.onConnection,
      setTimer: options.setTimer ?? ((fn, ms) => setTimeout(fn, ms)),
      clearTimer: options.clearTimer ?? ((h) => clearTimeout(h as ReturnType<typeof setTimeout>)),
    };
    this.delay = this.opts.backoffMs;
  }

  /** Follow ``run`` from seq ``after`` (exclusive); returns the function that stops it. */
  follow(run: number, after: number, listener: Listener): () => void {
    let entry = this.runs.get(run);
    if (!entry) {
      entry = { after, listeners: new Set() };
      this.runs.set(run, entry);
      this.sendFollow(run, after);
    }
    entry.listeners.add(listener);
    this.ensureSocket();
    return () => this.unfollow(run, listener);
  }

  /**
   * Be told when runs were created (the server's ``runs.created``: it names no run; reload
   * the list through the API, which applies filters and permissions). Also told after a
   * reconnect, since runs may have been created while the socket was down. Returns the
   * function that stops it.
   */
  watchNewRuns(listener: () => void): () => void {
    const first = this.newRunListeners.size === 0;
    this.newRunListeners.add(listener);
    if (first) this.sendRaw({ type: "watch_new" });
    this.ensureSocket();
    return () => {
      this.newRunListeners.delete(listener);
      if (this.newRunListeners.size === 0) this.sendRaw({ type: "unwatch_new" });
    };
  }

  /** The connection state now. */
  get connection(): Connection {
    return this.state;
  }

  /** Listen to connection changes; returns the function that stops listening. */
  onConnectionChange(fn: (state: Connection) => void): () => void {
    this.connectionListeners.add(fn);
    return () => this.connectionListeners.delete(fn);
  }

  /** The last seq handed over for ``run`` (its cursor), or undefined when not followed. */
  lastSeq(run: number): number | undefined {
    return this.runs.get(run)?.after;
  }

  /** Close the socket for good. */
  close(): void {
    this.closed = true;
    if (this.timer !== null) this.opts.clearTimer(this.timer);
    this.timer = null;
    const socket = this.socket;
    this.socket = null;
    socket?.close();
    this.setState("closed");
  }

  private unfollow(run: number, listener: Listener): void {
    const entry = this.runs.get(run);
    if (!entry) return;
    entry.listeners.delete(listener);
    if (entry.listeners.size === 0) {
      this.runs.delete(run);
      this.sendRaw({ type: "unfollow", run });
    }
  }

  private setState(state: Connection): void {
    if (state === this.state) return;
    this.state = state;
    this.opts.onConnection?.(state);
    for (const fn of [...this.connectionListeners]) fn(state);
  }

  private open = false;
  private reopened = false;

  private sendRaw(message: object): void {
    if (this.socket && this.open) this.socket.send(JSON.stringify(message));
  }

  private sendFollow(run: number, after: number): void {
    this.sendRaw({ type: "follow", run, after });
  }

  private ensureSocket(): void {
    if (this.closed || this.socket || this.timer !== null) return;
    const socket = this.opts.connect(this.opts.url);
    this.socket = socket;
    this.open = false;
    socket.onopen = () => {
      if (this.socket !== socket) return;
      this.open = true;
      this.delay = this.opts.backoffMs;
      this.setState("open");
      for (const [run, entry] of this.runs) this.sendFollow(run, entry.after);
      if (this.newRunListeners.size > 0) {
        this.sendRaw({ type: "watch_new" });
        if (this.reopened) for (const fn of [...this.newRunListeners]) fn(); // runs may have been created meanwhile
      }
      this.reopened = true;
    };
    socket.onmessage = (ev) => {
      if (this.socket === socket) this.receive(ev.data);
    };
    socket.onerror = () => undefined; // onclose follows and reconnects
    socket.onclose = () => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.open = false;
      if (this.closed) return;
      this.setState("reconnecting");
      const wait = this.delay;
      this.delay = Math.min(this.delay * 2, this.opts.maxBackoffMs);
      this.timer = this.opts.setTimer(() => {
        this.timer = null;
        if (this.runs.size > 0 || this.newRunListeners.size > 0) this.ensureSocket();
      }, wait);
    };
  }

  private receive(raw: unknown): void {
    let message: unknown;
    try {
      message = typeof raw === "string" ? JSON.parse(raw) : raw;
    } catch {
      return;
    }
    if (!message || typeof message !== "object") return;
    const m = message as { type?: string; event?: unknown };
    if (m.type === "runs.created") {
      for (const fn of [...this.newRunListeners]) fn();
      return;
    }
    if (m.type !== "event" || !isEvent(m.event)) return;
    const event = m.event;
    const entry = this.runs.get(event.run);
    if (!entry) return;
    if (event.seq <= entry.after) return; // a duplicate: handed over already
    if (event.seq !== entry.after + 1) {
      // A gap (cannot come from a correct server): ask again from the last seq we have.
      this.sendRaw({ type: "unfollow", run: event.run });
      this.sendFollow(event.run, entry.after);
      return;
    }
    entry.after = event.seq;
    for (const listener of [...entry.listeners]) listener([event]);
  }
}

let shared: RunEventStream | null = null;

/** The page's one stream (one socket for every component that follows runs). */
export function sharedStream(): RunEventStream {
  if (!shared) shared = new RunEventStream();
  return shared;
}
