// The browser app's entry: read the page context, mount the top bar and the page component it names.
import { StrictMode, Suspense } from "react";
import { createRoot } from "react-dom/client";
import { setCsrfToken } from "./lib/api";
import { applyTheme, readTheme } from "./lib/theme";
import { PageContextReact, readPageContext } from "./lib/context";
import { pages, preloadPage } from "./pages";
import { TopBar } from "./shell/TopBar";
import { ErrorBoundary } from "./shell/ErrorBoundary";
import { Skeleton } from "./shell/Skeleton";
import "./styles/app.css";
import "./styles/status.css";

// The stored theme before anything renders (the system's otherwise: styles/app.css follows it).
applyTheme(readTheme());

const ctx = readPageContext();
setCsrfToken(ctx.csrf_token);

// #topbar: on every page for a signed-in user (server-rendered account pages too).
const topbar = document.getElementById("topbar");
if (topbar !== null && ctx.user !== null) {
  createRoot(topbar).render(
    <StrictMode>
      <PageContextReact.Provider value={ctx}>
        <TopBar />
      </PageContextReact.Provider>
    </StrictMode>,
  );
}

// #app: the page component; absent on server-rendered pages (page "").
const root = document.getElementById("app");
if (root !== null && ctx.page !== "") {
  preloadPage(ctx.page, ctx.props);
  const Page = pages[ctx.page];
  createRoot(root).render(
    <StrictMode>
      <PageContextReact.Provider value={ctx}>
        <ErrorBoundary>
          <Suspense fallback={<div className="page-loading"><Skeleton variant="page" lines={6} label="Loading the page…" /></div>}>
            {Page ? <Page {...ctx.props} /> : <p role="alert" className="page">Unknown page “{ctx.page}”.</p>}
          </Suspense>
        </ErrorBoundary>
      </PageContextReact.Provider>
    </StrictMode>,
  );
}
