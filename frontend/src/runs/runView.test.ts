import type { AttemptSpan, RunStep, StepStatus } from "../api/types";
import { attemptSpan, runStep } from "../test/factories";
import { RUN_STATE_COLOURS } from "../builder/runStateColours";
import { nodeMarks, packDrawnLanes, stepsShown, testedNodeOnly, stateChangeRows, stateColour, stateKeysOrdered, stepState, timelineLayout, timelineScale } from "./runView";

/** An attempt as a server from before ``retry_at`` sent it: without the key (the schema's type has it). */
function older(a: AttemptSpan): AttemptSpan {
  const { retry_at: _absent, ...rest } = a;
  return rest as AttemptSpan;
}

const T0 = Date.parse("2026-12-02T10:00:00Z");
const at = (ms: number) => new Date(T0 + ms).toISOString();

function step(id: number, node_id: string, status: StepStatus, from: number | null, to: number | null, extra: Partial<RunStep> = {}): RunStep {
  return runStep({ id, node_id, status, attempt: from === null ? 0 : 1, started_at: from === null ? null : at(from), finished_at: to === null ? null : at(to), ...extra });
}

describe("stepState", () => {
  it("maps every step status to one of the node states", () => {
    expect(stepState({ status: "pending", attempt: 0, error: null })).toBe("pending");
    expect(stepState({ status: "pending", attempt: 1, error: { message: "503" } })).toBe("retrying");
    expect(stepState({ status: "running", attempt: 1, error: null })).toBe("running");
    expect(stepState({ status: "running", attempt: 1, error: null, worker_alive: true })).toBe("running");
    // The server worked out that the step's worker stopped heartbeating.
    expect(stepState({ status: "running", attempt: 1, error: null, worker_alive: false })).toBe("interrupted");
    expect(stepState({ status: "suspended", attempt: 1, error: null })).toBe("running");
    for (const s of ["waiting", "parked", "succeeded", "failed", "cancelled"] as const) expect(stepState({ status: s, attempt: 1, error: null })).toBe(s);
    expect(stepState({ status: "waiting", attempt: 1, error: null, kind: "subgraph" })).toBe("running"); // at work in its child run
    // A status a newer server may add, outside the schema's union.
    expect(stepState({ status: "something new" as StepStatus, attempt: 0, error: null })).toBe("pending");
  });

  it("gives each state its own colour", () => {
    const states = ["pending", "running", "succeeded", "failed", "waiting", "skipped", "parked", "retrying", "interrupted"] as const;
    const colours = states.map((s) => stateColour(s));
    expect(new Set(colours).size).toBe(states.length);
    expect(stateColour("failed")).toBe(RUN_STATE_COLOURS.failed);
  });
});

describe("nodeMarks", () => {
  const steps = [
    step(1, "start", "succeeded", 0, 5),
    step(2, "fetch", "pending", 10, 20, { attempt: 1, max_attempts: 3, error: { message: "timeout" } }),
    step(3, "review", "waiting", 10, null),
    step(4, "agent", "suspended", 10, null),
    step(5, "agent#0/turn-0", "running", 11, null, { parent: 4 }),
    step(6, "loop", "succeeded", 0, 1), step(7, "loop", "running", 2, null, { iteration: 1, attempt: 2, max_attempts: 3, worker_alive: false }),
  ];

  it("marks each node by its latest step, and nodes without a step pending while the run is live", () => {
    const marks = nodeMarks(["start", "fetch", "review", "agent", "loop", "end"], steps, "running");
    expect(marks.start).toEqual({ state: "succeeded", detail: "5 ms" });
    expect(marks.fetch).toEqual({ state: "retrying", detail: "attempt 1 of 3 · 10 ms" });
    expect(marks.review?.state).toBe("waiting");
    expect(marks.agent?.state).toBe("running");
    expect(marks.loop).toEqual({ state: "interrupted", detail: "2 iterations · attempt 2 of 3" });
    expect(marks.end).toEqual({ state: "pending" });
    expect(Object.keys(marks)).not.toContain("agent#0/turn-0");
  });

  it("marks nodes the run never reached as skipped once it has ended", () => {
    expect(nodeMarks(["end", "discard"], [step(1, "end", "succeeded", 0, 1)], "succeeded").discard).toEqual({ state: "skipped" });
    expect(nodeMarks(["discard"], [], "failed").discard?.state).toBe("skipped");
    expect(nodeMarks(["discard"], [], "cancelled").discard?.state).toBe("skipped");
  });
});

describe("timelineLayout", () => {
  it("puts a sequential run in one lane", () => {
    const l = timelineLayout([step(1, "a", "succeeded", 0, 10), step(2, "b", "succeeded", 10, 30), step(3, "c", "succeeded", 31, 40)], T0 + 100);
    expect(l.lanes).toBe(1);
    expect(l.bars.map((b) => [b.step.node_id, b.lane, b.from, b.to])).toEqual([["a", 0, 0, 10], ["b", 0, 10, 30], ["c", 0, 31, 40]]);
    expect(l.span).toBe(40);
    expect(l.bars[0]!.room).toBe(10); // up to b's start
    expect(l.bars[2]!.room).toBe(9); // up to the chart's end
  });

  it("puts parallel branches side by side in lanes and reuses a lane once it is free", () => {
    const fanOut = [
      step(1, "start", "succeeded", 0, 5),
      step(2, "a", "succeeded", 6, 50), step(3, "b", "succeeded", 6, 20), step(4, "c", "failed", 7, 30),
      step(5, "b2", "succeeded", 21, 40),
      step(6, "join", "succeeded", 50, 55),
    ];
    const l = timelineLayout(fanOut, T0 + 100);
    const lane = Object.fromEntries(l.bars.map((b) => [b.step.node_id, b.lane]));
    expect(l.lanes).toBe(3);
    expect(new Set([lane.a, lane.b, lane.c]).size).toBe(3);
    expect(lane.b2).toBe(lane.b); // b's lane is free again at 21
    expect(lane.join).toBe(0);
    expect(l.bars.find((b) => b.step.node_id === "c")!.state).toBe("failed");
  });

  it("stretches a running step to now, leaves out steps that never started, and draws each attempt and the backoff between", () => {
    const retried = step(2, "fetch", "succeeded", 10, 90, {
      attempt: 2, max_attempts: 3,
      // An older server's answer: no retry_at key at all.
      attempts: [older(attemptSpan({ number: 1, status: "failed", started_at: at(10), finished_at: at(20) })), older(attemptSpan({ number: 2, status: "succeeded", started_at: at(60), finished_at: at(90) }))],
    });
    const l = timelineLayout([step(1, "a", "running", 0, null), retried, step(3, "later", "pending", null, null)], T0 + 120);
    expect(l.bars.map((b) => b.step.node_id)).toEqual(["a", "fetch"]);
    expect(l.bars[0]!.to).toBe(120);
    expect(l.bars[1]!.lane).toBe(1);
    expect(l.bars[1]!.attempts).toEqual([
      { number: 1, status: "failed", errorCode: null, from: 10, to: 20, drawTo: 20 },
      { number: 2, status: "succeeded", errorCode: null, from: 60, to: 90, drawTo: 90 },
    ]);
    // An answer without due times: the wait runs to the next attempt's start.
    expect(l.bars[1]!.backoffs).toEqual([{ after: 1, from: 20, to: 60, due: false }]);
  });

  it("gives each attempt its own bar with its error code, and each backoff its due time", () => {
    // ask: attempt 1 ran 100-112 ms and failed (503); its retry was due at 2 112 ms; a worker took it at 2 140 ms.
    const ask = step(2, "ask", "succeeded", 2140, 2200, {
      attempt: 2, max_attempts: 3, error: { code: "http_error" },
      attempts: [
        { number: 1, status: "failed", started_at: at(100), finished_at: at(112), error_code: "http_error", retry_at: at(2112) },
        { number: 2, status: "succeeded", started_at: at(2140), finished_at: at(2200), error_code: null, retry_at: null },
      ],
    });
    const l = timelineLayout([step(1, "start", "succeeded", 0, 90), ask], T0 + 5000);
    const bar = l.bars[1]!;
    // The row starts at the first attempt (the step's started_at is its latest attempt's).
    expect([bar.lane, bar.from, bar.to]).toEqual([0, 100, 2200]);
    expect(bar.attempts.map((a) => [a.number, a.status, a.errorCode, a.from, a.to])).toEqual([[1, "failed", "http_error", 100, 112], [2, "succeeded", null, 2140, 2200]]);
    // The backoff ends when the retry was due, not when a worker got to it.
    expect(bar.backoffs).toEqual([{ after: 1, from: 112, to: 2112, due: true }]);
    // 2 s of backoff is drawn to scale, like work: no break cuts it short.
    expect(timelineScale(l).breaks).toEqual([]);
  });

  it("reaches a retry's due time while the step waits for it, and draws no backoff after a lost attempt", () => {
    const waiting = step(1, "ask", "pending", 0, null, {
      attempt: 1, max_attempts: 3, error: { code: "timeout" },
      attempts: [{ number: 1, status: "failed", started_at: at(0), finished_at: at(50), error_code: "timeout", retry_at: at(4050) }],
    });
    const l = timelineLayout([waiting], T0 + 1000);
    expect(l.bars[0]!.state).toBe("retrying");
    expect(l.bars[0]!.to).toBe(4050); // the retry is due after now: the row shows how long it still waits
    expect(l.bars[0]!.backoffs).toEqual([{ after: 1, from: 50, to: 4050, due: true }]);
    expect(l.span).toBe(4050);
    const rerun = step(2, "pay", "succeeded", 0, 300, {
      attempt: 2,
      attempts: [
        { number: 1, status: "lost", started_at: at(0), finished_at: at(100), error_code: null, retry_at: null },
        { number: 2, status: "succeeded", started_at: at(200), finished_at: at(300), error_code: null, retry_at: null },
      ],
    });
    expect(timelineLayout([rerun], T0 + 1000).bars[0]!.backoffs).toEqual([]);
  });

  it("runs a gate's last attempt on to its decision, and cuts a long backoff short like a wait", () => {
    const gate = step(1, "review", "succeeded", 0, 48_000, { attempts: [attemptSpan({ started_at: at(0), finished_at: at(10) })] });
    const a = timelineLayout([gate], T0 + 60_000).bars[0]!.attempts[0]!;
    expect([a.from, a.to, a.drawTo]).toEqual([0, 10, 48_000]);
    const slow = step(2, "ask", "succeeded", 0, 120_200, {
      attempt: 2,
      attempts: [
        { number: 1, status: "failed", started_at: at(0), finished_at: at(100), error_code: "rate_limited", retry_at: at(120_100) },
        { number: 2, status: "succeeded", started_at: at(120_100), finished_at: at(120_200), error_code: null, retry_at: null },
      ],
    });
    const layout = timelineLayout([slow], T0 + 200_000);
    expect(layout.bars[0]!.backoffs).toEqual([{ after: 1, from: 100, to: 120_100, due: true }]);
    expect(timelineScale(layout).breaks).toMatchObject([{ from: 100, to: 120_100 }]);
  });

  it("shows a step whose worker stopped heartbeating as interrupted, still holding its lane up to now", () => {
    const l = timelineLayout([step(1, "a", "running", 0, null, { worker_alive: false }), step(2, "b", "running", 5, null, { worker_alive: true })], T0 + 50);
    expect(l.bars.map((b) => [b.step.node_id, b.state, b.lane, b.to])).toEqual([["a", "interrupted", 0, 50], ["b", "running", 1, 50]]);
  });

  it("stretches a step waiting at a gate or parked for a decision to now", () => {
    const l = timelineLayout([step(1, "start", "succeeded", 0, 10), step(2, "review", "waiting", 10, null), step(3, "pay", "parked", 12, null)], T0 + 500);
    expect(l.bars.map((b) => [b.step.node_id, b.to])).toEqual([["start", 10], ["review", 500], ["pay", 500]]);
  });

  it("is empty before any step started", () => {
    expect(timelineLayout([step(1, "start", "pending", null, null)], T0)).toMatchObject({ bars: [], lanes: 0 });
  });
});

describe("timelineScale", () => {
  const attempt = (from: number, to: number | null) => ({ attempts: [attemptSpan({ status: to === null ? "running" : "succeeded", started_at: at(from), finished_at: to === null ? null : at(to) })] });
  // start 100 ms, lookup 200 ms, a gate decided after 48 s (its attempt took 10 ms), pay 200 ms.
  const gated = [
    step(1, "start", "succeeded", 0, 100, attempt(0, 100)),
    step(2, "lookup", "succeeded", 100, 300, attempt(100, 300)),
    step(3, "review", "succeeded", 300, 48_300, { kind: "approval", ...attempt(300, 310) }),
    step(4, "pay", "succeeded", 48_300, 48_500, attempt(48_300, 48_500)),
  ];

  it("draws a run without long pauses to scale", () => {
    const scale = timelineScale(timelineLayout(gated.slice(0, 2), T0 + 1000));
    expect(scale.breaks).toEqual([]);
    expect(scale.x(150)).toBeCloseTo(0.5);
    expect(scale.time(0.5)).toBeCloseTo(150);
  });

  it("draws a long approval wait short, so the steps around it keep readable widths", () => {
    const layout = timelineLayout(gated, T0 + 60_000);
    const scale = timelineScale(layout);
    // The wait's real span, and that some step was open through it.
    expect(scale.breaks).toHaveLength(1);
    expect(scale.breaks[0]).toMatchObject({ from: 310, to: 48_300, waiting: true });
    const width = (node: string) => {
      const bar = layout.bars.find((b) => b.step.node_id === node)!;
      return scale.x(bar.to) - scale.x(bar.from);
    };
    // To scale each would be under 0.5 % of the chart; now each short step is a sixth of it or more.
    expect(width("start")).toBeGreaterThan(0.15);
    expect(width("lookup")).toBeGreaterThan(0.3);
    expect(width("review")).toBeLessThan(0.15);
    expect(scale.breaks[0]!.width).toBeLessThan(0.15);
    // The order of time is kept, the axis runs 0..1, and inside the break there is no one time.
    expect(scale.x(0)).toBe(0);
    expect(scale.x(48_500)).toBe(1);
    expect(scale.x(310)).toBeLessThan(scale.x(20_000));
    expect(scale.x(20_000)).toBeLessThan(scale.x(48_300));
    expect(scale.time(scale.x(48_400))).toBeCloseTo(48_400);
    expect(scale.time(scale.breaks[0]!.x + scale.breaks[0]!.width / 2)).toBeNull();
  });

  it("calls a stretch waiting when a step was open through most of it, idle when none was", () => {
    // The decision at 48 300, the next step picked up 400 ms later.
    const later = [...gated.slice(0, 3), step(4, "pay", "succeeded", 48_700, 48_900, attempt(48_700, 48_900))];
    expect(timelineScale(timelineLayout(later, T0 + 60_000)).breaks[0]).toMatchObject({ from: 310, to: 48_700, waiting: true });
    const queued = [gated[0]!, step(2, "late", "succeeded", 30_000, 30_200, attempt(30_000, 30_200))];
    expect(timelineScale(timelineLayout(queued, T0 + 60_000)).breaks[0]).toMatchObject({ from: 100, to: 30_000, waiting: false });
  });

  it("keeps time to scale while another branch works through a gate's wait", () => {
    const busy = [...gated, step(5, "crunch", "succeeded", 300, 48_300, attempt(300, 48_300))];
    expect(timelineScale(timelineLayout(busy, T0 + 60_000)).breaks).toEqual([]);
  });
});

describe("state difference", () => {
  const changed = { reply: { before: null, after: "Hello Ada", added: true }, count: { before: 1, after: 2, added: false } };

  it("lists what a step changed by key, telling new keys from changed ones", () => {
    expect(stateChangeRows(changed)).toEqual([
      { key: "count", change: "changed", before: 1, after: 2 },
      { key: "reply", change: "added", before: null, after: "Hello Ada" },
    ]);
    expect(stateChangeRows({})).toEqual([]);
  });

  it("orders the state's keys with the changed ones first", () => {
    expect(stateKeysOrdered({ name: "Ada", reply: "Hello Ada", count: 2, a: 0 }, changed)).toEqual([
      { key: "count", changed: true }, { key: "reply", changed: true }, { key: "a", changed: false }, { key: "name", changed: false },
    ]);
  });
});

describe("a fork's kept nodes and a test run's harness", () => {
  it("marks a fork's nodes that have no step of their own as kept from its source, not as not taken", () => {
    const steps = [step(5, "ask", "succeeded", 0, 10), step(6, "end", "succeeded", 10, 20)];
    const marks = nodeMarks(["start", "draft", "ask", "other", "end"], steps, "succeeded", { run: 1, nodes: ["start", "draft"] });
    expect(marks.start).toEqual({ state: "kept", detail: "from run #1" });
    expect(marks.draft!.state).toBe("kept");
    expect(marks.ask!.state).toBe("succeeded");
    expect(marks.other!.state).toBe("skipped"); // a branch neither run took
    expect(nodeMarks(["start"], [], "succeeded").start!.state).toBe("skipped");
  });

  it("draws a test snapshot's tested node alone, without the harness's end node", () => {
    const harness = { name: "g", nodes: [{ id: "calc", kind: "transform", config: {} }, { id: "test_end", kind: "end", config: {} }], edges: [{ source: "calc", target: "test_end" }] };
    const drawn = testedNodeOnly(harness, "calc");
    expect(drawn.nodes.map((n) => n.id)).toEqual(["calc"]);
    expect(drawn.edges).toEqual([]);
  });

  it("lists a test run's tested node's steps and their children, not the harness's end step", () => {
    const steps = [step(1, "agent", "succeeded", 0, 10), step(2, "turn", "succeeded", 1, 2, { parent: 1 }), step(3, "test_end", "succeeded", 10, 11)];
    expect(stepsShown(steps, "agent").map((s) => s.id)).toEqual([1, 2]);
    expect(stepsShown(steps, null)).toBe(steps);
  });
});

describe("packDrawnLanes", () => {
  it("moves a step that starts as a quick one ends to the next lane, where the quick one's minimum width would lie under it", () => {
    // fetch: 1 s of backoff then a 3 ms retry; end starts the moment fetch ends, at the chart's end.
    const fetch = step(1, "fetch", "succeeded", 0, 1003);
    const l = timelineLayout([fetch, step(2, "end", "succeeded", 1003, 1004)], T0 + 2000);
    expect(l.bars.map((b) => b.lane)).toEqual([0, 0]); // by time alone they touch
    const packed = packDrawnLanes(l, timelineScale(l), 8 / 800);
    expect(packed.bars.map((b) => b.lane)).toEqual([0, 1]);
    expect(packed.lanes).toBe(2);
    expect(l.bars[1]!.lane).toBe(0); // the layout given is not changed
  });

  it("keeps a chain of wide steps in one lane, touching bars included, with room up to the next bar", () => {
    const l = timelineLayout([step(1, "a", "succeeded", 0, 100), step(2, "b", "succeeded", 100, 200), step(3, "c", "succeeded", 200, 300)], T0 + 1000);
    const packed = packDrawnLanes(l, timelineScale(l), 8 / 800);
    expect(packed.bars.map((b) => [b.lane, b.room])).toEqual([[0, 100], [0, 100], [0, 100]]);
  });
});

