// The one set of status colours: each run, step, attempt and request status maps to a token (accent, text, background), mirrored as CSS custom properties in styles/status.css.

/**
 * A status token. ``accent``: the status's colour where it marks something (a canvas card's
 * frame, a timeline bar, a legend swatch, a minimap dot; one value for both themes); ``text`` on
 * ``bg``: a badge or a pill naming the status in the light theme, ``darkText`` on ``darkBg`` in the
 * dark one (WCAG AA: at least 4.5:1, checked by statusTokens.test.ts).
 */
export interface StatusToken {
  accent: string;
  text: string;
  bg: string;
  darkText: string;
  darkBg: string;
}

/** The token names: the node states of a run's canvas and timeline, plus ``neutral`` for a status no token names. */
export type StatusKey =
  | "pending" | "running" | "retrying" | "waiting" | "parked" | "interrupted"
  | "succeeded" | "failed" | "cancelled" | "skipped" | "kept" | "neutral";

/**
 * The values; styles/status.css declares the same as ``--status-<key>``, ``--status-<key>-text``
 * and ``--status-<key>-bg`` (the last two as ``light-dark(light, dark)``; statusTokens.test.ts checks they agree), and classes
 * ``status-<key>`` that set ``--status``, ``--status-text`` and ``--status-bg`` for a component.
 */
export const STATUS_TOKENS: Readonly<Record<StatusKey, StatusToken>> = {
  pending: { accent: "#94a3b8", text: "#334155", bg: "#f1f5f9", darkText: "#cbd5e1", darkBg: "#1e293b" },
  running: { accent: "#2563eb", text: "#1e40af", bg: "#dbeafe", darkText: "#bfdbfe", darkBg: "#172554" },
  retrying: { accent: "#9333ea", text: "#6b21a8", bg: "#f3e8ff", darkText: "#e9d5ff", darkBg: "#3b0764" },
  waiting: { accent: "#d97706", text: "#92400e", bg: "#fef3c7", darkText: "#fde68a", darkBg: "#451a03" },
  parked: { accent: "#c2410c", text: "#9a3412", bg: "#ffedd5", darkText: "#fed7aa", darkBg: "#431407" },
  interrupted: { accent: "#be185d", text: "#9d174d", bg: "#fce7f3", darkText: "#fbcfe8", darkBg: "#500724" },
  succeeded: { accent: "#16a34a", text: "#166534", bg: "#dcfce7", darkText: "#bbf7d0", darkBg: "#052e16" },
  failed: { accent: "#dc2626", text: "#991b1b", bg: "#fee2e2", darkText: "#fecaca", darkBg: "#450a0a" },
  cancelled: { accent: "#6b7280", text: "#374151", bg: "#f3f4f6", darkText: "#d1d5db", darkBg: "#1f2937" },
  skipped: { accent: "#cbd5e1", text: "#475569", bg: "#f8fafc", darkText: "#cbd5e1", darkBg: "#1e293b" },
  kept: { accent: "#0d9488", text: "#115e59", bg: "#ccfbf1", darkText: "#99f6e4", darkBg: "#042f2e" },
  neutral: { accent: "#64748b", text: "#334155", bg: "#eef1f5", darkText: "#cbd5e1", darkBg: "#1e293b" },
};

const ALIASES: Readonly<Record<string, StatusKey>> = {
  queued: "pending", ready: "pending", not_started: "pending",
  leased: "running", suspended: "running",
  waiting_at_approval: "waiting", waiting_approval: "waiting",
  waiting_for_decision: "parked",
  completed: "succeeded", done: "succeeded", approved: "succeeded", alive: "succeeded",
  error: "failed", dead: "failed", lost: "failed", rejected: "failed", expired: "failed", silent: "failed",
  canceled: "cancelled", timed_out: "cancelled",
};

/** The token of any status the app shows (a run's, a step's, an attempt's, an approval request's); ``neutral`` for one it does not know. */
export function statusKey(status: string): StatusKey {
  if (status in STATUS_TOKENS) return status as StatusKey;
  return ALIASES[status] ?? "neutral";
}

/** The CSS class that sets ``--status``, ``--status-text`` and ``--status-bg`` to ``status``'s token. */
export function statusClass(status: string): string {
  return `status-${statusKey(status)}`;
}

/** WCAG 2 relative luminance of a ``#rrggbb`` colour. */
export function luminance(hex: string): number {
  const channel = (i: number) => {
    const c = parseInt(hex.slice(i, i + 2), 16) / 255;
    return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  return 0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5);
}

/** WCAG 2 contrast ratio of two ``#rrggbb`` colours (1 to 21). */
export function contrast(a: string, b: string): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}
