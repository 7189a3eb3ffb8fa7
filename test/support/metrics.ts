// Scrapes a liken /metrics endpoint and reads samples from the Prometheus text exposition
// (name{label="value",...} number). Small on purpose: `promtool check metrics` is the
// format's judge (npm run test:image); this only reads the numbers back.
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseExposition(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = LINE.exec(line);
    if (m === null) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(LABEL)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

export async function scrape(url: string): Promise<Sample[]> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`GET ${url}: ${res.status}`);
  return parseExposition(await res.text());
}

/** The sum of every sample named `name` whose labels include `labels` (0 when none). */
export function total(
  samples: Sample[],
  name: string,
  labels: Record<string, string> = {},
): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((n, s) => n + s.value, 0);
}

/**
 * The URL a liken process logged as `"url":"…","msg":"metrics served"` (pino JSON); the last
 * one, for a log that several processes wrote in turn (an agent restarted after a reboot).
 */
export function metricsUrlIn(log: string): string | undefined {
  let url: string | undefined;
  for (const line of log.split("\n")) {
    if (line.includes('"metrics served"')) url = (JSON.parse(line) as { url?: string }).url;
  }
  return url;
}
