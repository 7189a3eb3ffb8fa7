// Times as the API server writes them (metav1.Time): RFC 3339 in UTC, whole seconds.

/** RFC 3339 in UTC without fractional seconds ("2026-12-02T12:00:00Z"). */
export function rfc3339(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, "Z");
}
