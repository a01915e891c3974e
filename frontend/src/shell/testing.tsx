// Test helpers for the shell and pages: a page context per role and a fetch stub that routes by method and path.
import { render, type RenderResult } from "@testing-library/react";
import type { ReactElement } from "react";
import { vi } from "vitest";
import { PageContextReact, type PageContext, type UserCan } from "../lib/context";

const NONE: UserCan = { build: false, operate: false, approve: false, admin: false };

/** A page context for a user with the given abilities (``null`` user: anonymous). */
export function makeContext(can: Partial<UserCan> | null, page = "home", extra: Partial<PageContext> = {}): PageContext {
  return {
    page,
    title: "Test",
    csrf_token: "csrf-test-token",
    urls: { home: "/", graphs: "/graphs/", runs: "/runs/", login: "/accounts/login/", logout: "/accounts/logout/",
      password_change: "/accounts/password_change/", admin: "/admin/", api: "/api/v1/" },
    props: {},
    user: can === null ? null : {
      id: 1, username: "ada", display_name: "Ada", is_staff: Boolean(can.admin), groups: [], can: { ...NONE, ...can },
    },
    ...extra,
  };
}

export function renderWith(ui: ReactElement, ctx: PageContext): RenderResult {
  return render(<PageContextReact.Provider value={ctx}>{ui}</PageContextReact.Provider>);
}

export interface Call { method: string; path: string; body: unknown; headers: Record<string, string> }
type Handler = (call: Call) => { status?: number; body?: unknown };

/**
 * Replace ``fetch`` with a router: ``routes["GET /api/v1/graphs/"]`` answers a call whose
 * path (without the query) matches; unknown routes answer 404. Returns the calls made.
 */
export function stubFetch(routes: Record<string, Handler>): Call[] {
  const calls: Call[] = [];
  vi.stubGlobal("fetch", vi.fn(async (url: string, init: RequestInit = {}) => {
    const method = init.method ?? "GET";
    const path = url.split("?")[0]!;
    const call: Call = {
      method, path: url, body: typeof init.body === "string" ? JSON.parse(init.body) : undefined,
      headers: (init.headers ?? {}) as Record<string, string>,
    };
    calls.push(call);
    const handler = routes[`${method} ${path}`];
    const answer = handler ? handler(call) : { status: 404, body: { error: { code: "not_found", message: "Not found.", fields: {} } } };
    const status = answer.status ?? 200;
    const text = answer.body === undefined ? "" : JSON.stringify(answer.body);
    return new Response(status === 204 ? null : text, { status, headers: { "Content-Type": "application/json" } });
  }));
  return calls;
}

export const page = <T,>(results: T[]) => ({ count: results.length, next: null, previous: null, results });
/** A keyset page body (runs, steps, audit): no count. */
export const cursorPage = <T,>(results: T[], next: string | null = null, previous: string | null = null) => ({ next, previous, results });
