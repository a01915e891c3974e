// The top bar's Approvals count follows the page's shared inbox socket: a request that arrives or leaves
// recounts within a moment; the 15 s poll runs only while the socket is not open.
import { act, renderHook, waitFor } from "@testing-library/react";
import { InboxSocket, SharedInbox } from "../lib/inboxLive";
import type { SocketLike } from "../lib/liveEvents";
import { stubFetch } from "./testing";
import { useWaitingCount, WAITING_POLL_MS } from "./TopBar";

class FakeSocket implements SocketLike {
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: unknown) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  send() {}
  close() { this.onclose?.({}); }
}

function fakeInbox() {
  const sockets: FakeSocket[] = [];
  const inbox = new SharedInbox((o) => new InboxSocket({
    ...o, url: "ws://x/ws/approvals/", connect: () => { const s = new FakeSocket(); sockets.push(s); return s; },
    setTimer: () => 0, clearTimer: () => undefined,
  }));
  return { inbox, sockets };
}

afterEach(() => { vi.unstubAllGlobals(); vi.useRealTimers(); });

describe("useWaitingCount", () => {
  it("counts again when the inbox socket says a request arrived or left, without waiting for the poll", async () => {
    let waiting = 0;
    const calls = stubFetch({ "GET /api/v1/approvals/inbox/counts/": () => ({ body: { assigned: 0, group: waiting, decided: 0, waiting } }) });
    const { inbox, sockets } = fakeInbox();
    const { result } = renderHook(() => useWaitingCount(true, true, inbox));
    await waitFor(() => expect(result.current).toBe(0));
    act(() => sockets[0]!.onopen?.({}));
    waiting = 1; // a run reached a gate
    act(() => sockets[0]!.onmessage?.({ data: JSON.stringify({ type: "approval.pending", approval: { id: 4 } }) }));
    await waitFor(() => expect(result.current).toBe(1), { timeout: 1500 });
    waiting = 0; // its run was cancelled
    act(() => sockets[0]!.onmessage?.({ data: JSON.stringify({ type: "approval.closed", approval: { id: 4 } }) }));
    await waitFor(() => expect(result.current).toBe(0), { timeout: 1500 });
    expect(calls.filter((c) => c.path.startsWith("/api/v1/approvals/inbox/counts/"))).toHaveLength(3);
  });

  it("polls only while the socket is not open", async () => {
    vi.useFakeTimers({ toFake: ["setInterval", "clearInterval"] });
    const calls = stubFetch({ "GET /api/v1/approvals/inbox/counts/": () => ({ body: { assigned: 0, group: 0, decided: 0, waiting: 0 } }) });
    const { inbox, sockets } = fakeInbox();
    const counted = () => calls.filter((c) => c.path.startsWith("/api/v1/approvals/inbox/counts/")).length;
    renderHook(() => useWaitingCount(true, true, inbox));
    act(() => sockets[0]!.onopen?.({}));
    const first = counted();
    act(() => { vi.advanceTimersByTime(WAITING_POLL_MS * 3); });
    expect(counted()).toBe(first); // live: no poll
    act(() => sockets[0]!.onclose?.({})); // dropped: reconnecting
    act(() => { vi.advanceTimersByTime(WAITING_POLL_MS); });
    expect(counted()).toBe(first + 1);
  });

  it("shares one socket between the top bar and the inbox page, and closes it with the last listener", () => {
    const { inbox, sockets } = fakeInbox();
    const got: string[] = [];
    const stopA = inbox.subscribe((m) => got.push(`a:${m.type}`));
    const stopB = inbox.subscribe((m) => got.push(`b:${m.type}`));
    expect(sockets).toHaveLength(1);
    sockets[0]!.onopen?.({});
    expect(inbox.connection).toBe("open");
    sockets[0]!.onmessage?.({ data: '{"type":"snapshot","approvals":[]}' });
    expect(got).toEqual(["a:snapshot", "b:snapshot"]);
    stopA();
    expect(inbox.connection).toBe("open");
    stopB();
    expect(inbox.connection).toBe("connecting");
    inbox.subscribe(() => undefined);
    expect(sockets).toHaveLength(2);
  });
});
