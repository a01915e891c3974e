import type { RunEvent } from "../api/types";
import { RunEventStream, type SocketLike } from "./liveEvents";

/** A socket the test drives: what the stream sent, and server messages pushed in. */
class FakeSocket implements SocketLike {
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: unknown) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  sent: unknown[] = [];
  closed = false;
  constructor(readonly url: string) {}
  send(data: string) { this.sent.push(JSON.parse(data)); }
  close() { this.closed = true; }
  open() { this.onopen?.({}); }
  drop() { this.onclose?.({}); }
  push(...events: Partial<RunEvent>[]) {
    for (const e of events) this.onmessage?.({ data: JSON.stringify({ type: "event", event: { id: e.seq, step: null, kind: "step_started", data: {}, created_at: "", ...e } }) });
  }
}

function harness() {
  const sockets: FakeSocket[] = [];
  const timers: { fn: () => void; ms: number }[] = [];
  const states: string[] = [];
  const stream = new RunEventStream({
    url: "ws://test/ws/runs/",
    connect: (url) => { const s = new FakeSocket(url); sockets.push(s); return s; },
    setTimer: (fn, ms) => { timers.push({ fn, ms }); return timers.length; },
    clearTimer: () => undefined,
    onConnection: (s) => states.push(s),
  });
  const last = (): FakeSocket => {
    const s = sockets[sockets.length - 1];
    if (!s) throw new Error("no socket opened yet");
    return s;
  };
  const timer = (i: number) => {
    const t = timers[i < 0 ? timers.length + i : i];
    if (!t) throw new Error(`no timer ${i}`);
    return t;
  };
  return { stream, sockets, timers, states, last, timer };
}

describe("RunEventStream", () => {
  it("follows a run from the last seq seen and hands over each event once, in order", () => {
    const { stream, last } = harness();
    const got: number[] = [];
    stream.follow(7, 3, (evs) => got.push(...evs.map((e) => e.seq)));
    last().open();
    expect(last().sent).toEqual([{ type: "follow", run: 7, after: 3 }]);
    last().push({ run: 7, seq: 4 }, { run: 7, seq: 5 }, { run: 7, seq: 5 }, { run: 7, seq: 3 }, { run: 7, seq: 6 });
    expect(got).toEqual([4, 5, 6]);
    expect(stream.lastSeq(7)).toBe(6);
  });

  it("reconnects with backoff after a drop and asks again from the last seq it handed over", () => {
    const { stream, sockets, timers, states, last, timer } = harness();
    const got: number[] = [];
    stream.follow(1, 0, (evs) => got.push(...evs.map((e) => e.seq)));
    last().open();
    last().push({ run: 1, seq: 1 }, { run: 1, seq: 2 });
    last().drop();
    expect(states).toContain("reconnecting");
    expect(timers.map((t) => t.ms)).toEqual([500]);
    timer(0).fn();
    last().drop(); // the server is still down: the delay doubles
    expect(timers.map((t) => t.ms)).toEqual([500, 1000]);
    timer(1).fn();
    last().open();
    expect(sockets).toHaveLength(3);
    expect(last().sent).toEqual([{ type: "follow", run: 1, after: 2 }]);
    // The server replays from 2; a late duplicate of 2 is dropped.
    last().push({ run: 1, seq: 2 }, { run: 1, seq: 3 }, { run: 1, seq: 4 });
    expect(got).toEqual([1, 2, 3, 4]);
    last().drop();
    expect(timer(-1).ms).toBe(500); // reset once a connection opened
  });

  it("asks again from its cursor when an event skips a seq, never showing the gap", () => {
    const { stream, last } = harness();
    const got: number[] = [];
    stream.follow(2, 0, (evs) => got.push(...evs.map((e) => e.seq)));
    last().open();
    last().push({ run: 2, seq: 1 }, { run: 2, seq: 3 });
    expect(got).toEqual([1]);
    expect(last().sent.slice(1)).toEqual([{ type: "unfollow", run: 2 }, { type: "follow", run: 2, after: 1 }]);
    last().push({ run: 2, seq: 2 }, { run: 2, seq: 3 });
    expect(got).toEqual([1, 2, 3]);
  });

  it("shares one socket between runs and listeners, and unfollows a run with its last listener", () => {
    const { stream, sockets, last } = harness();
    const a: number[] = [];
    const b: number[] = [];
    const stopA = stream.follow(1, 0, (evs) => a.push(...evs.map((e) => e.seq)));
    const stopB = stream.follow(1, 0, (evs) => b.push(...evs.map((e) => e.seq)));
    stream.follow(9, 4, () => undefined);
    last().open();
    expect(sockets).toHaveLength(1);
    expect(last().sent).toEqual([{ type: "follow", run: 1, after: 0 }, { type: "follow", run: 9, after: 4 }]);
    last().push({ run: 1, seq: 1 }, { run: 5, seq: 1 });
    expect(a).toEqual([1]);
    expect(b).toEqual([1]);
    stopA();
    expect(last().sent).toHaveLength(2);
    stopB();
    expect(last().sent[2]).toEqual({ type: "unfollow", run: 1 });
    last().push({ run: 1, seq: 2 });
    expect(b).toEqual([1]);
  });

  it("ignores what is not an event and stops for good on close", () => {
    const { stream, timers, last } = harness();
    const got: number[] = [];
    stream.follow(3, 0, (evs) => got.push(...evs.map((e) => e.seq)));
    last().open();
    last().onmessage?.({ data: "not json" });
    last().onmessage?.({ data: JSON.stringify({ type: "error", error: { code: "not_found" } }) });
    stream.close();
    expect(last().closed).toBe(true);
    last().drop();
    expect(timers).toHaveLength(0);
    expect(got).toEqual([]);
  });
  it("watches for new runs: asks once, is told on runs.created, asks again and catches up after a reconnect", () => {
    const { stream, last, timer } = harness();
    let told = 0;
    const stop = stream.watchNewRuns(() => { told += 1; });
    last().open();
    expect(last().sent).toEqual([{ type: "watch_new" }]);
    last().onmessage?.({ data: JSON.stringify({ type: "runs.created" }) });
    expect(told).toBe(1);
    last().drop();
    timer(-1).fn();
    last().open();
    expect(last().sent).toEqual([{ type: "watch_new" }]);
    expect(told).toBe(2); // runs may have been created while the socket was down
    stop();
    expect(last().sent).toEqual([{ type: "watch_new" }, { type: "unwatch_new" }]);
    last().onmessage?.({ data: JSON.stringify({ type: "runs.created" }) });
    expect(told).toBe(2);
  });
});
