// The page registry: page name (from the Django view's context) -> lazily loaded component.
import { lazy, type ComponentType, type LazyExoticComponent } from "react";
import { startBuilderLoad, versionParam } from "../builder/load";

// Each page is its own chunk, so the first page loads only its own code.
export type PageComponent = LazyExoticComponent<ComponentType<Record<string, unknown>>>;

export const pages: Record<string, PageComponent> = {
  home: lazy(() => import("./Home")),
  graphs: lazy(() => import("./GraphList")),
  runs: lazy(() => import("./RunList")),
  run: lazy(() => import("./RunPage")),
  compare: lazy(() => import("./ComparePage")),
  approvals: lazy(() => import("./Approvals")),
  placeholder: lazy(() => import("./Placeholder")),
  costs: lazy(() => import("./Costs")),
  audit: lazy(() => import("./Audit")),
  workers: lazy(() => import("./Workers")),
  tokens: lazy(() => import("./Tokens")),
  users: lazy(() => import("./Users")),
  providers: lazy(() => import("./Providers")),
  mcpservers: lazy(() => import("./McpServers")),
  forbidden: lazy(() => import("./Forbidden")),
  notfound: lazy(() => import("./NotFound")),
  builder: lazy(() => import("../builder/BuilderPage")),
};

/**
 * Start the data the page ``name`` opens with, before its chunk has downloaded (called by the
 * entry right after it reads the page context); pages without an entry here fetch their own.
 */
export function preloadPage(name: string, props: Record<string, unknown>): void {
  if (name === "builder" && typeof props.graphId === "number") startBuilderLoad(props.graphId, versionParam());
}
