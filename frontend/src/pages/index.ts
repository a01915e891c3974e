// The page registry: page name (from the Django view's context) -> lazily loaded component.
import { lazy, type ComponentType, type LazyExoticComponent } from "react";

// Each page is its own chunk, so the first page loads only its own code.
export type PageComponent = LazyExoticComponent<ComponentType<Record<string, unknown>>>;

export const pages: Record<string, PageComponent> = {
  home: lazy(() => import("./Home")),
  graphs: lazy(() => import("./GraphList")),
  runs: lazy(() => import("./RunList")),
  run: lazy(() => import("./RunPage")),
  placeholder: lazy(() => import("./Placeholder")),
  builder: lazy(() => import("../builder/BuilderPage")),
};
