// An agent's log read on from where the last look ended, for the instant a phase begins: a
// phase lasts milliseconds to a second, and the log is the only place it shows in time (a
// power cut drawn for a phase falls on the first machine to begin it: process-faults.ts).
import { closeSync, openSync, readSync, statSync } from "node:fs";

export function sizeOf(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/**
 * Whether a line of the log after byte `from` begins the phase `marker` names; `next`: where
 * the complete lines read end (the next look starts there).
 */
export function saidSince(
  file: string,
  from: number,
  marker: string,
): { said: boolean; next: number } {
  const size = sizeOf(file);
  if (size <= from) return { said: false, next: from };
  const fd = openSync(file, "r");
  try {
    const buf = Buffer.alloc(size - from);
    readSync(fd, buf, 0, buf.length, from);
    const text = buf.toString("utf8");
    const complete = text.slice(0, text.lastIndexOf("\n") + 1);
    const said = complete
      .split("\n")
      .some((l) => l.includes(marker) && l.includes('"msg":"begin"'));
    return { said, next: from + Buffer.byteLength(complete) };
  } finally {
    closeSync(fd);
  }
}
