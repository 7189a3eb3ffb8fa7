// Reading untrusted YAML documents (release.yaml, channel.yaml): a size cap before parsing,
// no aliases (no billion laughs), unique keys, and a small field reader whose errors name
// the field path and what to do.
import { parse } from "yaml";
import { VerifyError } from "./errors.js";

export function parseCappedYaml(bytes: Uint8Array, what: string, maxBytes: number): unknown {
  if (bytes.length > maxBytes) {
    throw new VerifyError(
      "LIKEN_VERIFY_DOCUMENT_TOO_LARGE",
      `${what}: ${bytes.length} bytes is more than the ${maxBytes} a valid document can have; refused before parsing`,
      { context: { what, size: bytes.length, maxBytes } },
    );
  }
  const text = Buffer.from(bytes).toString("utf8");
  try {
    // maxAliasCount 0: liken's documents never need anchors, and refusing them all closes
    // the exponential-expansion attack with no tuning.
    return parse(text, { maxAliasCount: 0, uniqueKeys: true, strict: true, prettyErrors: false });
  } catch (cause) {
    throw new VerifyError(
      "LIKEN_VERIFY_DOCUMENT_INVALID",
      `${what}: not valid YAML for liken (${(cause as Error).message.split("\n")[0]}); aliases and duplicate keys are refused`,
      { cause, context: { what } },
    );
  }
}

/** Reads fields of an untrusted object; every failure names `what` and the field path. */
export class Fields {
  constructor(
    readonly what: string,
    readonly path: string,
    readonly value: Record<string, unknown>,
  ) {}

  static root(what: string, v: unknown): Fields {
    return new Fields(what, "", asObject(what, "(document)", v));
  }

  fail(field: string, message: string): never {
    const where = this.at(field);
    throw new VerifyError("LIKEN_VERIFY_DOCUMENT_INVALID", `${this.what}: ${where} ${message}`, {
      context: { what: this.what, field: where },
    });
  }

  at(field: string): string {
    return this.path === "" ? field : `${this.path}.${field}`;
  }

  /** Refuses fields the schema does not name: a typo must not pass silently. */
  only(keys: readonly string[]): this {
    for (const k of Object.keys(this.value)) {
      if (!keys.includes(k)) this.fail(k, `is not a known field (known: ${keys.join(", ")})`);
    }
    return this;
  }

  str(field: string, re?: RegExp, hint = ""): string {
    const v = this.value[field];
    if (typeof v !== "string") this.fail(field, `must be a string${hint ? ` (${hint})` : ""}`);
    if (re && !re.test(v))
      this.fail(field, `"${v.slice(0, 80)}" is not valid${hint ? `: ${hint}` : ""}`);
    return v;
  }

  optional(field: string): boolean {
    return this.value[field] !== undefined;
  }

  int(field: string, min: number, max = Number.MAX_SAFE_INTEGER): number {
    const v = this.value[field];
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min || v > max) {
      this.fail(field, `must be a whole number from ${min} to ${max}`);
    }
    return v;
  }

  obj(field: string): Fields {
    return new Fields(
      this.what,
      this.at(field),
      asObject(this.what, this.at(field), this.value[field]),
    );
  }

  list(field: string, maxItems: number): unknown[] {
    const v = this.value[field];
    if (!Array.isArray(v)) this.fail(field, "must be a list");
    if (v.length > maxItems)
      this.fail(field, `has ${v.length} items; at most ${maxItems} are allowed`);
    return v;
  }

  item(field: string, i: number, v: unknown): Fields {
    const p = `${this.at(field)}[${i}]`;
    return new Fields(this.what, p, asObject(this.what, p, v));
  }
}

function asObject(what: string, where: string, v: unknown): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    throw new VerifyError("LIKEN_VERIFY_DOCUMENT_INVALID", `${what}: ${where} must be a mapping`, {
      context: { what, field: where },
    });
  }
  return v as Record<string, unknown>;
}
