// A data-loading hook over api(): loading, data or error, and reload; stale answers are dropped.
import { useCallback, useEffect, useRef, useState } from "react";
import { api } from "../lib/api";

export interface ApiState<T> {
  data: T | undefined;
  error: Error | undefined;
  loading: boolean;
  /** Fetch again (keeps the old data on screen while loading). */
  reload: () => void;
}

/** GET ``path`` (relative to /api/v1/) whenever it changes; ``null`` fetches nothing. */
export function useApi<T>(path: string | null): ApiState<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<Error | undefined>(undefined);
  const [loading, setLoading] = useState(path !== null);
  const [tick, setTick] = useState(0);
  const latest = useRef(0);

  useEffect(() => {
    if (path === null) return;
    const id = ++latest.current;
    const controller = new AbortController();
    setLoading(true);
    api<T>(path, { signal: controller.signal })
      .then((value) => {
        if (id !== latest.current) return;
        setData(value);
        setError(undefined);
      })
      .catch((err: unknown) => {
        if (id !== latest.current || controller.signal.aborted) return;
        setError(err instanceof Error ? err : new Error(String(err)));
      })
      .finally(() => {
        if (id === latest.current) setLoading(false);
      });
    return () => controller.abort();
  }, [path, tick]);

  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, loading, reload };
}

/** A page link (an absolute URL from the API) as a path ``api()`` and ``useApi()`` take. */
export function pagePath(url: string): string {
  const parsed = new URL(url, window.location.origin);
  return parsed.pathname + parsed.search;
}
