// Long flows as a list of named phases that log their begin and end (docs/style.md): a failure
// names the phase it happened in.
import { isLikenError } from "../errors.js";

export type Log = (line: string) => void;

export async function phase<T>(log: Log, name: string, fn: () => T | Promise<T>): Promise<T> {
  log(`phase ${name}: begin`);
  const t = Date.now();
  try {
    const r = await fn();
    log(`phase ${name}: done in ${Date.now() - t} ms`);
    return r;
  } catch (e) {
    log(`phase ${name}: failed after ${Date.now() - t} ms${isLikenError(e) ? ` [${e.code}]` : ""}`);
    if (isLikenError(e)) e.context.phase = name;
    throw e;
  }
}
