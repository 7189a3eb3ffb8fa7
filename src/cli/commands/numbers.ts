// Numbers on the command line, checked when parsed: a port out of range or a word where a
// count belongs is a usage error naming the flag's value, not a RangeError from deep inside.
// Light on purpose: the agent's lean entry imports it.
import { InvalidArgumentError } from "commander";

/** A TCP port: 0 (pick a free one) to 65535. */
export function parsePort(v: string): number {
  const n = /^\d+$/.test(v.trim()) ? Number(v) : NaN;
  if (!Number.isInteger(n) || n > 65535) {
    throw new InvalidArgumentError(`"${v}" is not a port: give 0 to 65535 (0 picks a free one)`);
  }
  return n;
}

/** A whole number of milliseconds, at least 1 and at most what Node's timers hold. */
export function parseMillis(v: string): number {
  const n = /^\d+$/.test(v.trim()) ? Number(v) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > 2 ** 31 - 1) {
    throw new InvalidArgumentError(
      `"${v}" is not a time in milliseconds: give a whole number from 1 to ${2 ** 31 - 1}`,
    );
  }
  return n;
}
