/** The p-th percentile (0–100) of a list of numbers, by nearest rank. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank] as number;
}

/** A number with a fixed number of decimals, for tables. */
export function fmt(value: number, decimals = 1): string {
  return Number.isFinite(value) ? value.toFixed(decimals) : 'n/a';
}
