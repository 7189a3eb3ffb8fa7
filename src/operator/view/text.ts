// Small formatting helpers for what a person reads (conditions, events, CLI).

/** "1h2m3s", "4m0s", "12s": how long, in the units a person reads at a glance. */
export function duration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const r = s % 60;
  if (h > 0) return `${h}h${m}m${r}s`;
  if (m > 0) return `${m}m${r}s`;
  return `${r}s`;
}

export function seconds(s: number): string {
  return duration(s * 1000);
}
