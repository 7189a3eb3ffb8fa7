// Which release is older: liken versions ("2026.10.12-001") compare as natural sort
// keys: runs of digits compare as numbers, everything else as text, left to right. The
// VERSION (oldest running) and NEWEST columns use it; nothing about safety does.

function parts(v: string): (number | string)[] {
  return [...v.matchAll(/(\d+)|(\D+)/g)].map((m) => (m[1] !== undefined ? Number(m[1]) : m[0]));
}

/** Negative when a is older than b, positive when newer, 0 when equal. */
export function compareVersions(a: string, b: string): number {
  const pa = parts(a);
  const pb = parts(b);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const x = pa[i];
    const y = pb[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    if (x === y) continue;
    if (typeof x === "number" && typeof y === "number") return x - y;
    return String(x) < String(y) ? -1 : 1;
  }
  return a < b ? -1 : a > b ? 1 : 0;
}

// A fleet runs a handful of distinct versions among thousands of machines: compare each
// distinct one once (parsing every machine's version per reconcile was the operator's
// largest CPU cost in bench:operator).
export function oldest(versions: readonly string[]): string | undefined {
  return [...new Set(versions)].reduce<string | undefined>(
    (acc, v) => (acc === undefined || compareVersions(v, acc) < 0 ? v : acc),
    undefined,
  );
}

export function newest(versions: readonly string[]): string | undefined {
  return [...new Set(versions)].reduce<string | undefined>(
    (acc, v) => (acc === undefined || compareVersions(v, acc) > 0 ? v : acc),
    undefined,
  );
}
