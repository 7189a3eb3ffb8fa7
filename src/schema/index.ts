// The pieces every config file liken reads is declared with (docs/adr/config-schema.md): a
// strict mapping whose unknown keys are refused with the keys it knows, a number within
// documented bounds, and the one way a failed check becomes words: the key path, what is
// allowed, and the value that was given. The files' own declarations live next to the code
// that reads them (src/slots/schema.ts, src/agent/config-schema.ts).
import * as z from "zod";

export { z };

/** How a mapping refuses what it does not hold. */
export interface StrictOptions {
  /** "is not WHAT": "a known timeout", "a slot name (a or b)" (default "a known field"). */
  unknown?: string;
  /** What a value that is not a mapping is told: "must be a mapping {a, b}" by default. */
  notMapping?: string;
}

/** A mapping with only these keys: an unknown one is an error naming every known key. */
export function strict<S extends z.ZodRawShape>(
  shape: S,
  opts: StrictOptions = {},
): z.ZodObject<S, z.core.$strict> {
  const known = Object.keys(shape).join(", ");
  return z.strictObject(shape, {
    error: (iss) => {
      if (iss.code === "unrecognized_keys")
        return `is not ${opts.unknown ?? "a known field"} (known: ${known})`;
      if (iss.code === "invalid_type") return opts.notMapping ?? `must be a mapping {${known}}`;
      return undefined;
    },
  });
}

/** A non-empty string; `what` completes "must ...". */
export function text(what: string): z.ZodString {
  return z.string({ error: `must ${what}` }).min(1, { error: `must ${what}` });
}

/**
 * A number in [min, max] in the key's own unit. A value that is not a positive number is told
 * so first (and only that); one out of bounds is told the bounds and why they are there.
 */
export function bounded(min: number, max: number, why: string): z.ZodNumber {
  const positive = "must be a positive number";
  const bounds = `must be between ${min} and ${max}: ${why}`;
  return z
    .number({ error: positive })
    .positive({ error: positive, abort: true })
    .min(min, { error: bounds })
    .max(max, { error: bounds });
}

/** `a.b[0].c`: the key path as a person writes it in the YAML file. */
export function keyPath(path: readonly PropertyKey[]): string {
  return path
    .map((k, i) => (typeof k === "number" ? `[${k}]` : `${i === 0 ? "" : "."}${String(k)}`))
    .join("");
}

/** The value given, when it is short enough to repeat (a scalar); a mapping or list is not. */
function given(input: unknown): string {
  if (input === undefined) return " (it is missing)";
  if (input === null) return " (got null)";
  if (typeof input === "object") return "";
  return ` (got ${JSON.stringify(input)})`;
}

/** One refusal: where, what is allowed, and what was there. */
export interface Refusal {
  /** The key path ("timeouts.proveMs", "health.commands[0].name"); "(document)" for the root. */
  field: string;
  /** The sentence after the key path: "must be between 1 and 10: ... (got 40)". */
  says: string;
}

/** Every issue of a failed check as a refusal, in the file's order. */
export function refusals(error: z.ZodError): Refusal[] {
  return error.issues.flatMap((iss): Refusal[] => {
    if (iss.code === "unrecognized_keys") {
      const keys = iss.keys.map((k) => keyPath([...iss.path, k]));
      return [{ field: keys.join(", "), says: iss.message }];
    }
    const field = iss.path.length === 0 ? "(document)" : keyPath(iss.path);
    return [{ field, says: `${iss.message}${given(iss.input)}` }];
  });
}

/**
 * Check `doc` against `schema`; on failure `fail` is told every refusal at once, so a person
 * mends the whole file in one pass ("file: a must ...; b.c is not a known field ...").
 */
export function check<T extends z.ZodType>(
  schema: T,
  doc: unknown,
  fail: (first: Refusal, all: Refusal[]) => never,
): z.output<T> {
  const r = schema.safeParse(doc, { reportInput: true });
  if (r.success) return r.data;
  const all = refusals(r.error);
  return fail(all[0]!, all);
}

/** The line a refusal list reads as: "a must ...; b is not ...". */
export function refusalText(all: readonly Refusal[]): string {
  return all.map((r) => `${r.field} ${r.says}`).join("; ");
}
