// The page context Django renders as one JSON script tag (#ballast-context), typed.
import { createContext, useContext } from "react";

/** What the signed-in user may do; the same roles the API enforces (the server refuses anyway). */
export interface UserCan {
  build: boolean; // create, edit, publish graphs (builders, staff)
  operate: boolean; // start, cancel, resume, retry, fork runs (operators, staff)
  approve: boolean; // decide approvals (approvers, graph-named approvers, staff)
  admin: boolean; // Django admin, provider credentials (staff)
  audit?: boolean; // the audit log (staff)
  workers?: boolean; // the workers page (staff, operators)
}

export interface PageUser {
  id: number;
  username: string;
  display_name: string;
  is_staff: boolean;
  groups: string[];
  can: UserCan;
}

/** The whole context of one page. ``props`` are the page component's own (graph id, run id, ...). */
export interface PageContext {
  page: string;
  title: string;
  user: PageUser | null;
  csrf_token: string;
  urls: Record<string, string>;
  props: Record<string, unknown>;
}

export const CONTEXT_ELEMENT_ID = "ballast-context";

/** Parse the context script tag; throws Error naming the element when it is missing or not JSON. */
export function readPageContext(doc: Document = document): PageContext {
  const el = doc.getElementById(CONTEXT_ELEMENT_ID);
  if (!el?.textContent) throw new Error(`#${CONTEXT_ELEMENT_ID} script tag is missing`);
  return JSON.parse(el.textContent) as PageContext;
}

export const PageContextReact = createContext<PageContext | null>(null);

/** The current page's context (inside the app root). */
export function usePageContext(): PageContext {
  const ctx = useContext(PageContextReact);
  if (ctx === null) throw new Error("usePageContext outside the app root");
  return ctx;
}
