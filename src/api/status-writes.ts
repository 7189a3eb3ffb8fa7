// The rules of a status write, shared by both HTTP clients (client.ts over client-node for the
// operator and people, rest-resource.ts over node:https for the agent): a status write names
// the resourceVersion it was computed from, and a conflict is retried with a fresh read.
import { ApiError, API_ERROR_CODES, isConflict } from "./errors.js";

interface Versioned {
  metadata: { name: string; resourceVersion?: string };
}

/**
 * The object's name, or a refusal when it carries no resourceVersion: an unconditioned write
 * could undo another writer's record (a reboot turn).
 */
export function requireResourceVersion(obj: Versioned, kind: string, verb: string): string {
  const name = obj.metadata.name;
  if (!obj.metadata.resourceVersion) {
    throw new ApiError(
      API_ERROR_CODES.usage,
      `${verb} ${kind} ${name}: the object has no metadata.resourceVersion; ` +
        "write only what was read from the server, so a concurrent change is detected",
      { context: { kind, name, verb } },
    );
  }
  return name;
}

/**
 * Read, decide, write the status, and on a conflict do all three again with the fresh object.
 * `decide` returns the new object to write, or undefined to write nothing; it must decide from
 * the object it is given (not from anything read before), which is what makes the retry safe:
 * a decision is never replayed onto a state it was not made for. `first`, when given, is an
 * object already at hand (a watch's): the first attempt starts from it instead of a read.
 */
export async function updateStatusLoop<T extends Versioned>(
  io: { get(name: string): Promise<T>; replaceStatus(obj: T): Promise<T> },
  name: string,
  decide: (current: T) => T | undefined | Promise<T | undefined>,
  attempts: number,
  first?: T,
): Promise<T | undefined> {
  let known = first;
  for (let attempt = 1; ; attempt++) {
    const current = known ?? (await io.get(name));
    known = undefined;
    const next = await decide(current);
    if (next === undefined) return undefined;
    try {
      return await io.replaceStatus(next);
    } catch (e) {
      if (!isConflict(e) || attempt >= attempts) throw e;
    }
  }
}
