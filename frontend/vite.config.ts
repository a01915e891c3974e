// Vite build of the browser app: one entry, a manifest Django reads, assets under /static/.
/// <reference types="vitest/config" />
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

export default defineConfig({
  plugins: [react()],
  // Django serves frontend/dist through STATICFILES_DIRS at STATIC_URL ("/static/").
  base: "/static/",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    // Vite's default ".vite/manifest.json" sits in a dot-folder that collectstatic skips.
    manifest: "manifest.json",
    sourcemap: true,
    rollupOptions: { input: "src/main.tsx" },
  },
  test: {
    environment: "jsdom",
    setupFiles: ["src/test/setup.ts"],
    include: ["src/**/*.test.{ts,tsx}"],
    globals: true,
    // One jsdom and module graph per worker instead of one per file: the environment and
    // imports (React Flow, rjsf) were most of the run's time. setup.ts unmounts after each
    // test, so no file sees another's DOM.
    isolate: false,
    // A test's ceiling, not its expected time: the machine is shared and loaded (CI runs these
    // beside two pytest lanes, and stress-ng in the stress series), where a findBy wait plus
    // user-event typing took 5.1 s, past vitest's default of 5 s. Waits end on what they wait for.
    testTimeout: 60_000,
    // The status and colour tokens' tests read styles/status.css and app.css as text ("?raw"): vitest empties CSS it does not process.
    css: { include: [/styles\/(status|app)\.css/] },
  },
});
