// The browser app's entry: read the page context, mount the page component it names.
import { StrictMode, Suspense } from "react";
import { createRoot } from "react-dom/client";
import { setCsrfToken } from "./lib/api";
import { PageContextReact, readPageContext } from "./lib/context";
import { pages } from "./pages";
import "./styles/app.css";

const ctx = readPageContext();
setCsrfToken(ctx.csrf_token);
const root = document.getElementById("app");
if (root === null) throw new Error("#app element is missing");
const Page = pages[ctx.page];
createRoot(root).render(
  <StrictMode>
    <PageContextReact.Provider value={ctx}>
      <Suspense fallback={<div className="page-loading" role="status">Loading…</div>}>
        {Page ? <Page {...ctx.props} /> : <p role="alert">Unknown page “{ctx.page}”.</p>}
      </Suspense>
    </PageContextReact.Provider>
  </StrictMode>,
);
