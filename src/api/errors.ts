// The API error family: every failure of a request to the Kubernetes API server, mapped
// from the HTTP status and the metav1.Status body the server sends, so callers branch on a
// stable code and `retryable` instead of parsing messages. The server's own message is kept
// whole: for a CEL refusal it is the sentence a person acts on.
import { errorText, LikenError, type LikenErrorOptions } from "../errors.js";

export const API_ERROR_CODES = {
  /** 409 on a write naming a stale resourceVersion: re-read, re-decide, write again. */
  conflict: "LIKEN_API_CONFLICT",
  /** 409 on create: an object of that name exists. */
  alreadyExists: "LIKEN_API_ALREADY_EXISTS",
  notFound: "LIKEN_API_NOT_FOUND",
  /** 422 (or 400): the server refused the object; `causes` lists the fields and why. */
  invalid: "LIKEN_API_INVALID",
  /** 403: RBAC or an admission policy refused the request. */
  forbidden: "LIKEN_API_FORBIDDEN",
  unauthorized: "LIKEN_API_UNAUTHORIZED",
  /** 410: a watch or list resumed from a resourceVersion the server no longer has. */
  gone: "LIKEN_API_GONE",
  /** 429, 5xx, or no answer at all: the server or the network; try again later. */
  unavailable: "LIKEN_API_UNAVAILABLE",
  /** Anything else the server answered. */
  request: "LIKEN_API_REQUEST",
  /** A caller asked for something the API layer will not send (e.g. a PUT without resourceVersion). */
  usage: "LIKEN_API_USAGE",
  /** The kubeconfig named by --kubeconfig or KUBECONFIG does not exist. */
  kubeconfig: "LIKEN_API_KUBECONFIG",
} as const;
export type ApiErrorCode = (typeof API_ERROR_CODES)[keyof typeof API_ERROR_CODES];

/** The parts of a metav1.Status liken uses. */
export interface KubeStatus {
  kind: "Status";
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: {
    name?: string;
    kind?: string;
    causes?: { reason?: string; message?: string; field?: string }[];
  };
}

export interface ApiErrorOptions extends LikenErrorOptions {
  httpStatus?: number;
  status?: KubeStatus;
}

export class ApiError extends LikenError {
  /** The HTTP status code, when the server answered. */
  readonly httpStatus: number | undefined;
  /** The server's metav1.Status, when it sent one. */
  readonly status: KubeStatus | undefined;

  constructor(code: ApiErrorCode, message: string, opts: ApiErrorOptions = {}) {
    super(code, message, opts);
    this.httpStatus = opts.httpStatus;
    this.status = opts.status;
  }

  /** The server's per-field refusals (CEL messages, pattern mismatches). */
  get causes(): { reason?: string; message?: string; field?: string }[] {
    return this.status?.details?.causes ?? [];
  }
}

/** A write conditioned on a resourceVersion met a newer object. Retryable after a re-read. */
export class ConflictError extends ApiError {
  constructor(message: string, opts: ApiErrorOptions = {}) {
    super(API_ERROR_CODES.conflict, message, { ...opts, retryable: true });
  }
}

export function isConflict(e: unknown): e is ConflictError {
  return e instanceof ConflictError;
}

export function isNotFound(e: unknown): e is ApiError {
  return e instanceof ApiError && e.code === API_ERROR_CODES.notFound;
}

/** 409 on a create: an object of that name exists already. */
export function isAlreadyExists(e: unknown): e is ApiError {
  return e instanceof ApiError && e.code === API_ERROR_CODES.alreadyExists;
}

/** 401: the credentials were not accepted (an expired client certificate, a revoked token). */
export function isUnauthorized(e: unknown): e is ApiError {
  return e instanceof ApiError && e.code === API_ERROR_CODES.unauthorized;
}

/** The server refused the object as it is (422, or 400): the same write would be refused again. */
export function isInvalid(e: unknown): e is ApiError {
  return e instanceof ApiError && e.code === API_ERROR_CODES.invalid;
}

/** What `read` returns, or undefined when the object does not exist (any other error throws). */
export async function unlessNotFound<T>(read: Promise<T>): Promise<T | undefined> {
  try {
    return await read;
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

/** Parse a response body (client-node keeps it as raw text) into a metav1.Status. */
export function parseStatus(body: unknown): KubeStatus | undefined {
  let value: unknown = body;
  if (typeof body === "string") {
    try {
      value = JSON.parse(body);
    } catch {
      return undefined;
    }
  }
  if (
    typeof value === "object" &&
    value !== null &&
    (value as { kind?: unknown }).kind === "Status"
  ) {
    return value as KubeStatus;
  }
  return undefined;
}

/** What was being done, for the message and the context: "update status of Cluster lab". */
export interface ApiOperation {
  verb: string;
  kind: string;
  name?: string;
}

function describe(op: ApiOperation): string {
  return op.name === undefined ? `${op.verb} ${op.kind}` : `${op.verb} ${op.kind} ${op.name}`;
}

/** The code for an HTTP status and the server's reason (409 means two different things). */
export function codeFor(httpStatus: number, reason: string | undefined): ApiErrorCode {
  if (httpStatus === 409) {
    return reason === "AlreadyExists" ? API_ERROR_CODES.alreadyExists : API_ERROR_CODES.conflict;
  }
  if (httpStatus === 404) return API_ERROR_CODES.notFound;
  if (httpStatus === 422 || httpStatus === 400) return API_ERROR_CODES.invalid;
  if (httpStatus === 403) return API_ERROR_CODES.forbidden;
  if (httpStatus === 401) return API_ERROR_CODES.unauthorized;
  if (httpStatus === 410) return API_ERROR_CODES.gone;
  if (httpStatus === 429 || httpStatus >= 500) return API_ERROR_CODES.unavailable;
  return API_ERROR_CODES.request;
}

function nextStep(code: ApiErrorCode): string {
  switch (code) {
    case API_ERROR_CODES.conflict:
      return "the object changed since it was read; read it again and retry";
    case API_ERROR_CODES.alreadyExists:
      return "an object of that name exists";
    case API_ERROR_CODES.notFound:
      return "it does not exist (is the liken API installed: kubectl apply -k config/?)";
    case API_ERROR_CODES.invalid:
      return "fix the object as the server says";
    case API_ERROR_CODES.forbidden:
      return "the identity lacks the permission (see config/rbac/ and config/admission/)";
    case API_ERROR_CODES.unauthorized:
      return "the credentials were not accepted; check the kubeconfig";
    case API_ERROR_CODES.gone:
      return "the resourceVersion is too old; list again";
    case API_ERROR_CODES.unavailable:
      return "the API server is busy or unreachable; retry later";
    case API_ERROR_CODES.kubeconfig:
      return "point --kubeconfig or KUBECONFIG at the cluster's kubeconfig";
    case API_ERROR_CODES.request:
    case API_ERROR_CODES.usage:
      return "see the server's message";
    default: {
      const never: never = code;
      return never;
    }
  }
}

const RETRYABLE: ReadonlySet<ApiErrorCode> = new Set([
  API_ERROR_CODES.conflict,
  API_ERROR_CODES.unavailable,
  API_ERROR_CODES.gone,
]);

/** Turn whatever a request threw (ApiException, fetch error, watch error) into an ApiError. */
export function toApiError(e: unknown, op: ApiOperation): ApiError {
  if (e instanceof ApiError) return e;
  const httpStatus = httpStatusOf(e);
  const context = { ...op } as Record<string, unknown>;
  if (httpStatus === undefined) {
    // An abort here is the request deadline (kubeconfig.ts REQUEST_TIMEOUT_MS) or a caller's.
    const why =
      (e as { name?: unknown } | null)?.name === "AbortError"
        ? "no whole answer before the request's deadline; the connection is given up"
        : errorText(e);
    return new ApiError(
      API_ERROR_CODES.unavailable,
      `${describe(op)}: no answer from the API server (${why}); retry later`,
      { retryable: true, context, cause: e },
    );
  }
  const status = parseStatus((e as { body?: unknown }).body);
  const code = codeFor(httpStatus, status?.reason);
  const said = status?.message ?? errorText(e).split("\n")[0];
  const message = `${describe(op)}: ${said} (HTTP ${httpStatus}): ${nextStep(code)}`;
  const opts = { httpStatus, status, context, cause: e, retryable: RETRYABLE.has(code) };
  return code === API_ERROR_CODES.conflict
    ? new ConflictError(message, opts)
    : new ApiError(code, message, opts);
}

function httpStatusOf(e: unknown): number | undefined {
  if (typeof e !== "object" || e === null) return undefined;
  const { code, statusCode } = e as { code?: unknown; statusCode?: unknown };
  if (typeof code === "number") return code;
  if (typeof statusCode === "number") return statusCode;
  return undefined;
}
