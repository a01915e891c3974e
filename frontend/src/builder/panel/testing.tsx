// Test helpers for the builder's panels: a real builder store around the component, and a scripted fetch.
import type { NodeKindInfo, ValidationResult } from "../../api/types";
import { render } from "@testing-library/react";
import { useEffect, useRef, useState, type ReactNode } from "react";
import { vi } from "vitest";
import { PageContextReact, type PageContext } from "../../lib/context";
import type { GraphSpec } from "../spec";
import { BuilderContext, useBuilderState, type BuilderApi, type Selection } from "../store";
import { KINDS } from "../../test/fixtures/nodeKinds";

export interface Harness {
  /** The latest builder state (spec, history flags, selection). */
  api(): BuilderApi;
  /** Coalesce keys of every change() call, in order. */
  changeKeys: (string | undefined)[];
}

interface Options {
  spec: GraphSpec;
  validation?: ValidationResult | null;
  readOnly?: boolean;
  catalogue?: NodeKindInfo[];
  selection?: Partial<Selection>;
  graphId?: number;
  /**
   * Give ``ui`` the builder state one timer tick late, as the page's deferred panel state can
   * be: while typing fast (``delay: null``) the panel renders values a few keystrokes old.
   */
  lag?: boolean;
}

/** Render ``ui`` inside a real useBuilderState store (and a page context with ``graphId``). */
export function renderInBuilder(ui: ReactNode, options: Options) {
  const harness: Harness & { current: BuilderApi | null } = {
    current: null,
    changeKeys: [],
    api() {
      if (!this.current) throw new Error("not rendered");
      return this.current;
    },
  };
  const page: PageContext = {
    page: "builder",
    title: options.spec.name,
    user: null,
    csrf_token: "t",
    urls: {},
    props: { graphId: options.graphId ?? 7 },
  };
  function Root() {
    const api = useBuilderState(options.spec, {
      readOnly: options.readOnly ?? false,
      catalogue: options.catalogue ?? KINDS,
      validation: options.validation ?? null,
    });
    const spied: BuilderApi = {
      ...api,
      change(edit, key) {
        harness.changeKeys.push(key);
        api.change(edit, key);
      },
    };
    harness.current = spied;
    const { select } = api;
    useEffect(() => {
      if (options.selection) select(options.selection);
    }, [select]);
    const latest = useRef(spied);
    latest.current = spied;
    const [late, setLate] = useState(spied);
    useEffect(() => {
      if (!options.lag) return;
      const t = setTimeout(() => setLate(latest.current), 0);
      return () => clearTimeout(t);
    }, [api]);
    return (
      <PageContextReact.Provider value={page}>
        <BuilderContext.Provider value={options.lag ? late : spied}>{ui}</BuilderContext.Provider>
      </PageContextReact.Provider>
    );
  }
  const result = render(<Root />);
  return { ...result, harness };
}

export interface FetchCall {
  url: string;
  method: string;
  body: unknown;
}

/**
 * Replace ``fetch`` with a scripted server: ``handler`` gets each call and returns
 * ``[status, body]``. Returns the list of calls made.
 */
export function scriptFetch(handler: (call: FetchCall) => [number, unknown] | Promise<[number, unknown]>): FetchCall[] {
  const calls: FetchCall[] = [];
  vi.stubGlobal(
    "fetch",
    vi.fn(async (url: string, init?: RequestInit) => {
      const call = { url, method: init?.method ?? "GET", body: init?.body ? JSON.parse(String(init.body)) : undefined };
      calls.push(call);
      const [status, body] = await handler(call);
      return new Response(body === undefined ? null : JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
    }),
  );
  return calls;
}

/** A small graph with one node of each kind the panels treat specially. */
export function sampleSpec(): GraphSpec {
  return {
    name: "Triage",
    description: "Sort tickets",
    input_schema: { type: "object", properties: { ticket: { type: "string" }, priority: { type: "integer", default: 3 } } },
    state: { notes: { reducer: "append", default: [] } },
    settings: { max_parallelism: 4 },
    nodes: [
      { id: "start", kind: "start", config: {} },
      { id: "route", kind: "condition", config: { expression: "priority > 2" } },
      { id: "calc", kind: "transform", config: { set: { score: "priority * 2" } } },
      { id: "ask", kind: "llm", label: "Ask model", config: { prompt: "Summarise {{ ticket }}" } },
      { id: "mail", kind: "tool", config: { tool: "send_email", args: { to: "{{ ticket }}" } } },
      { id: "end", kind: "end", config: {} },
    ],
    edges: [
      { source: "start", target: "route" },
      { source: "route", source_handle: "true", target: "calc" },
    ],
  };
}
