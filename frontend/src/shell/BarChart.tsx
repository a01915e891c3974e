// A bar chart drawn by Chart.js, loaded on first use (its own chunk: no other page, the builder included, downloads it).
import { useEffect, useRef, useState } from "react";

/** One series of a bar chart: a name, a colour and one value per label (dollars, tokens...). */
export interface BarSeries {
  name: string;
  color: string;
  values: number[];
}

export interface BarChartProps {
  /** What the chart shows, for screen readers (the same figures are in the table beside it). */
  title: string;
  labels: string[];
  series: BarSeries[];
  /** Stack the series (parts of one total) instead of placing them side by side. */
  stacked?: boolean;
  /** Bars along the y axis: long category names (graphs, nodes, models) stay readable. */
  horizontal?: boolean;
  /** How a value reads on the axis and in tooltips. */
  format: (value: number) => string;
  height?: number;
}

type ChartModule = typeof import("./chartjs");
let loading: Promise<ChartModule> | null = null;

/** Chart.js with only the pieces a bar chart needs registered (./chartjs), imported once per page. */
export function loadChartJs(): Promise<ChartModule> {
  loading ??= import("./chartjs");
  return loading;
}

export function BarChart({ title, labels, series, stacked = false, horizontal = false, format, height = 240 }: BarChartProps) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const [failed, setFailed] = useState<string | null>(null);
  // The chart reads these through a ref: a new format function each render must not redraw it.
  const formatRef = useRef(format);
  formatRef.current = format;

  useEffect(() => {
    let chart: { destroy: () => void } | null = null;
    let cancelled = false;
    loadChartJs()
      .then(({ Chart }) => {
        const el = canvas.current;
        if (cancelled || !el || !el.getContext("2d")) return;
        // A canvas cannot use CSS variables: read the theme's tokens as resolved colours (light-dark() applied).
        const resolve = (token: string) => { el.style.color = `var(${token})`; const c = getComputedStyle(el).color; el.style.color = ""; return c; };
        const [gridColour, textColour] = [resolve("--border"), resolve("--muted")];
        const valueAxis = {
          stacked,
          beginAtZero: true,
          ticks: { color: textColour, callback: (v: string | number) => formatRef.current(Number(v)) },
          grid: { color: gridColour },
        };
        const categoryAxis = { stacked, grid: { display: false }, ticks: { color: textColour, autoSkip: true, maxRotation: 0 } };
        chart = new Chart(el, {
          type: "bar",
          data: {
            labels,
            datasets: series.map((s) => ({ label: s.name, data: s.values, backgroundColor: s.color, borderRadius: 3, maxBarThickness: 42 })),
          },
          options: {
            indexAxis: horizontal ? "y" : "x",
            color: textColour,
            responsive: true,
            maintainAspectRatio: false,
            animation: false,
            plugins: {
              legend: { display: series.length > 1, position: "bottom", labels: { color: textColour, boxWidth: 12, boxHeight: 12 } },
              tooltip: { callbacks: { label: (item) => `${item.dataset.label ?? ""}: ${formatRef.current(Number(item.raw))}` } },
            },
            scales: horizontal ? { x: valueAxis, y: categoryAxis } : { x: categoryAxis, y: valueAxis },
          },
        });
      })
      .catch((err: unknown) => {
        if (!cancelled) setFailed(err instanceof Error ? err.message : String(err));
      });
    return () => {
      cancelled = true;
      chart?.destroy();
    };
  }, [labels, series, stacked, horizontal]);

  if (failed) return <p className="muted chart-failed">The chart could not be drawn ({failed}); the table has the same figures.</p>;
  return (
    <div className="chart" style={{ height }}>
      <canvas ref={canvas} role="img" aria-label={title} />
    </div>
  );
}
