// Display of money, tokens and JSON values in the builder's panels.
import type { CostFigure } from "../store";

/** ``"0.0123"`` or 0.0123 -> ``"$0.012"``, 12.5 -> ``"$12.50"`` (2 to 6 decimals); null -> ``"—"``. */
export function formatUsd(usd: string | number | null | undefined): string {
  if (usd === null || usd === undefined || usd === "") return "—";
  const n = typeof usd === "number" ? usd : Number(usd);
  if (!Number.isFinite(n)) return String(usd);
  // Two significant digits for small amounts ("$0.0021"), cents from a dollar up.
  const digits = n === 0 || Math.abs(n) >= 1 ? 2 : Math.min(6, Math.max(2, 1 - Math.floor(Math.log10(Math.abs(n)))));
  return `$${n.toFixed(digits)}`;
}

/** 12345 -> ``"12,345 tokens"``; null -> ``"—"``. */
export function formatTokens(tokens: number | null | undefined): string {
  if (tokens === null || tokens === undefined) return "—";
  return `${tokens.toLocaleString("en-US")} token${tokens === 1 ? "" : "s"}`;
}

/** One line for an estimate: ``"$0.0040 · 1,200 tokens"``. */
export function formatCost(figure: CostFigure | null | undefined): string {
  if (!figure) return "—";
  return `${formatUsd(figure.usd)} · ${formatTokens(figure.tokens)}`;
}

/** A value as short text: strings as they are, everything else as JSON. */
export function displayValue(value: unknown): string {
  if (value === undefined || value === null || value === "") return "—";
  if (typeof value === "string") return value;
  return JSON.stringify(value, null, 2);
}
