// Display of JSON values in the builder's panels (money, tokens and estimates: shell/format.ts, the one formatter).

/** A value as short text: strings as they are, everything else as JSON. */
export function displayValue(value: unknown): string {
  if (value === undefined || value === null || value === "") return "—";
  if (typeof value === "string") return value;
  return JSON.stringify(value, null, 2);
}
