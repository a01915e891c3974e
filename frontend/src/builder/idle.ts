// Deferring work the canvas does not need until the page has been quiet for a while (side panel, node forms).

/** How long the page must go without a new call before deferred work starts, ms. */
export const QUIET_MS = 600;

type IdleWindow = Window & {
  requestIdleCallback?: (cb: () => void, opts?: { timeout: number }) => number;
  cancelIdleCallback?: (id: number) => void;
};

/**
 * Run ``work`` once ``ms`` have passed and the main thread is next idle (requestIdleCallback,
 * at most ``idleTimeout`` ms later; a plain timer where the browser has none, as in jsdom).
 * Returns a cancel function (safe to call after ``work`` ran). Used so that chunks the canvas
 * does not need (the side panel's code editors, the node form's JSON-Schema library) are
 * fetched, evaluated and rendered after the graph is drawn and the user's first drag, not
 * inside them.
 */
export function afterQuiet(work: () => void, ms: number = QUIET_MS, idleTimeout = 1000): () => void {
  const w = window as IdleWindow;
  let idle: number | null = null;
  let done = false;
  const run = () => { if (!done) { done = true; work(); } };
  const timer = window.setTimeout(() => {
    if (w.requestIdleCallback) idle = w.requestIdleCallback(run, { timeout: idleTimeout });
    else run();
  }, ms);
  return () => {
    done = true;
    window.clearTimeout(timer);
    if (idle !== null) w.cancelIdleCallback?.(idle);
  };
}
