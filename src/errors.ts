// The shape every liken error shares (STYLE.md, "Errors carry a stable code and their
// context"). Each module defines its own family by extending LikenError with its own codes;
// this file is the one piece of liken that even the bottom layers may import.

export interface LikenErrorOptions {
  /** Whether trying the same thing again can help (a network blip) or not (a bad digest). */
  retryable?: boolean;
  /** What the error concerns: the artifact, the slot, the machine, the step. */
  context?: Record<string, unknown>;
  cause?: unknown;
}

export class LikenError extends Error {
  /** Stable, greppable, documented: LIKEN_<MODULE>_<WHAT>. Never reworded. */
  readonly code: string;
  readonly retryable: boolean;
  readonly context: Record<string, unknown>;

  constructor(code: string, message: string, opts: LikenErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.code = code;
    this.retryable = opts.retryable ?? false;
    this.context = opts.context ?? {};
  }
}

export function isLikenError(e: unknown, code?: string): e is LikenError {
  return e instanceof LikenError && (code === undefined || e.code === code);
}

/** What a thrown value says, for a log line or a status message (a throw need not be an Error). */
export function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** The stable code a thrown value carries (LikenError, Node's errno errors), if any. */
export function errorCode(e: unknown): string | undefined {
  const code = (e as { code?: unknown } | null | undefined)?.code;
  return typeof code === "string" ? code : undefined;
}
