// Placeholders in the shape of what is loading (grey bars), instead of a "Loading…" line: the page keeps its layout while it waits.

/**
 * ``lines`` grey bars (widths vary so it reads as text) inside a ``role="status"`` region whose
 * name is ``label`` (read out, not shown). ``variant="table"``: rows of a table; ``"page"``: a
 * heading bar, then the lines in a card (a whole page waiting for its code or data).
 */
export function Skeleton({ lines = 3, label = "Loading…", variant = "lines" }: { lines?: number; label?: string; variant?: "lines" | "table" | "page" }) {
  const bars = Array.from({ length: lines }, (_, i) => (
    <span key={i} className="skeleton-bar" style={{ width: variant === "table" ? "100%" : `${[92, 78, 86, 64, 72][i % 5]}%` }} />
  ));
  return (
    <div className={`skeleton skeleton--${variant}`} role="status" aria-busy="true" aria-label={label}>
      <span className="visually-hidden">{label}</span>
      {variant === "page" ? (
        <>
          <span className="skeleton-bar skeleton-bar--title" />
          <span className="skeleton-card">{bars}</span>
        </>
      ) : bars}
    </div>
  );
}
