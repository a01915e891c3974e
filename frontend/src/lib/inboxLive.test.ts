import type { SocketLike } from "./liveEvents";
import { InboxSocket, parseInboxMessage, type InboxMessage } from "./inboxLive";

class FakeSocket implements SocketLike {
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: unknown) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  sent: string[] = [];
  send(data: string) { this.sent.push(data); }
  close() { this.onclose?.({}); }
}

describe("inbox live socket", () => {
  it("parses only the inbox's own messages", () => {
    expect(parseInboxMessage('{"type":"snapshot","approvals":[]}')).toEqual({ type: "snapshot", approvals: [] });
    expect(parseInboxMessage('{"type":"snapshot","count":12,"approvals":[]}')).toEqual({ type: "snapshot", count: 12, approvals: [] });
    expect(parseInboxMessage('{"type":"approval.more","count":3}')).toEqual({ type: "approval.more", count: 3 });
    expect(parseInboxMessage('{"type":"approval.more"}')).toBeNull();
    expect(parseInboxMessage({ type: "approval.closed", approval: { id: 3 } })?.type).toBe("approval.closed");
    expect(parseInboxMessage("not json")).toBeNull();
    expect(parseInboxMessage({ type: "approval.closed", approval: { id: "3" } })).toBeNull();
    expect(parseInboxMessage({ type: "event", event: {} })).toBeNull();
  });

  it("reconnects with a doubling backoff and hands over every message after each snapshot", () => {
    const sockets: FakeSocket[] = [];
    const timers: { fn: () => void; ms: number }[] = [];
    const got: InboxMessage[] = [];
    const states: string[] = [];
    const live = new InboxSocket({
      onMessage: (m) => got.push(m), onConnection: (s) => states.push(s),
      connect: () => { const s = new FakeSocket(); sockets.push(s); return s; },
      url: "ws://x/ws/approvals/", setTimer: (fn, ms) => { timers.push({ fn, ms }); return timers.length; }, clearTimer: () => undefined,
    });
    sockets[0]!.onopen?.({});
    sockets[0]!.onmessage?.({ data: '{"type":"snapshot","approvals":[]}' });
    sockets[0]!.onmessage?.({ data: JSON.stringify({ type: "approval.pending", approval: { id: 7 } }) });
    sockets[0]!.onclose?.({});
    expect(timers.map((t) => t.ms)).toEqual([500]);
    timers[0]!.fn();
    sockets[1]!.onclose?.({}); // failed again: a longer wait
    expect(timers.map((t) => t.ms)).toEqual([500, 1000]);
    timers[1]!.fn();
    sockets[2]!.onopen?.({});
    sockets[2]!.onmessage?.({ data: '{"type":"snapshot","approvals":[]}' });
    expect(got.map((m) => m.type)).toEqual(["snapshot", "approval.pending", "snapshot"]);
    expect(states).toEqual(["open", "reconnecting", "reconnecting", "open"]);
    live.close();
    expect(sockets).toHaveLength(3);
  });
});
