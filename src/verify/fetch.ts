// HTTP for the trust chain, over undici, with every failure explicit: an idle timeout on
// headers and body, redirects followed only on the same origin, a byte cap on documents,
// Range requests for resuming, and a server that ignores Range detected (200 vs 206).
import { errors as undiciErrors, request, type Dispatcher } from "undici";
import { VerifyError } from "./errors.js";
import { describeProxy, proxyDispatcher, proxySettings } from "./proxy.js";

/** 30 s without a byte: long enough for a loaded CDN edge, short enough to notice a stall. */
export const DEFAULT_IDLE_TIMEOUT_MS = 30_000;
/** A redirect chain longer than this is a loop or an attack. */
const MAX_REDIRECTS = 3;

export interface FetchOptions {
  idleTimeoutMs?: number;
  signal?: AbortSignal;
}

type Body = Dispatcher.ResponseData["body"];

/** Drops a body we will not read. undici reports the abort as an 'error' event, which
 * would crash the process without a listener. */
export function discardBody(body: Body): void {
  body.on("error", () => {});
  body.destroy();
}

function statusError(url: URL, status: number): VerifyError {
  const hint =
    status === 404
      ? "check the source URL and the version (is the release published?)"
      : status >= 500
        ? "the server failed; check its log (liken tries again, with backoff)"
        : "the server refused the request";
  return new VerifyError("LIKEN_VERIFY_HTTP_STATUS", `GET ${url.href}: HTTP ${status}; ${hint}`, {
    retryable: status >= 500 || status === 429,
    context: { url: url.href, status },
  });
}

/** Maps undici's and the socket's failures to liken's codes; keeps liken errors as they are. */
export function fetchFailure(url: URL, cause: unknown, idleMs: number): unknown {
  if (cause instanceof VerifyError) return cause;
  if (
    cause instanceof undiciErrors.BodyTimeoutError ||
    cause instanceof undiciErrors.HeadersTimeoutError
  ) {
    return new VerifyError(
      "LIKEN_VERIFY_STALLED",
      `GET ${url.href}: no bytes for ${idleMs} ms; the server stalled`,
      { retryable: true, cause, context: { url: url.href } },
    );
  }
  // undici reports a proxy that refused the tunnel as an abort ("Proxy response (403) !== 200
  // when HTTP Tunneling"); it is a connection failure, not our own stop.
  const proxyRefused = /^Proxy response \(\d+\)/.test((cause as Error)?.message ?? "");
  if ((cause as Error)?.name === "AbortError" && !proxyRefused) return cause;
  // Through a proxy, the failure may be the proxy's (it refused the CONNECT, or is down).
  const proxy = describeProxy(proxySettings());
  return new VerifyError(
    "LIKEN_VERIFY_CONNECTION",
    `GET ${url.href}: ${(cause as Error)?.message ?? String(cause)}${proxy === undefined ? "" : ` (proxy variables: ${proxy}; check that the proxy is up and allows ${url.host})`}`,
    {
      retryable: true,
      cause,
      context: { url: url.href, ...(proxy !== undefined ? { proxy } : {}) },
    },
  );
}

export interface Response {
  url: URL;
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Body;
}

function requestOptions(
  headers: Record<string, string>,
  idle: number,
  signal: AbortSignal | undefined,
): { dispatcher?: Dispatcher } & Omit<Dispatcher.RequestOptions, "origin" | "path"> {
  const dispatcher = proxyDispatcher();
  return {
    method: "GET",
    headers,
    headersTimeout: idle,
    bodyTimeout: idle,
    ...(signal ? { signal } : {}),
    ...(dispatcher !== undefined ? { dispatcher } : {}),
  };
}

/**
 * GET with redirects followed only within the origin of `url`: a release must come from the
 * source the catalog names, never from wherever a server points.
 */
export async function get(
  url: URL,
  headers: Record<string, string>,
  o: FetchOptions = {},
): Promise<Response> {
  const idle = o.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS;
  const options = requestOptions(headers, idle, o.signal);
  let at = url;
  for (let hop = 0; ; hop++) {
    let res: Dispatcher.ResponseData;
    try {
      res = await request(at, options);
    } catch (cause) {
      throw fetchFailure(at, cause, idle);
    }
    if (res.statusCode < 300 || res.statusCode >= 400) {
      return { url: at, status: res.statusCode, headers: res.headers, body: res.body };
    }
    discardBody(res.body);
    const location = res.headers.location;
    const next = typeof location === "string" ? new URL(location, at) : undefined;
    if (!next || next.origin !== url.origin || hop >= MAX_REDIRECTS) {
      throw new VerifyError(
        "LIKEN_VERIFY_REDIRECT_REFUSED",
        `GET ${at.href}: HTTP ${res.statusCode} to ${next?.href ?? "(no location)"} refused; liken follows redirects only within ${url.origin}, at most ${MAX_REDIRECTS}`,
        { context: { url: at.href, location: next?.href } },
      );
    }
    at = next;
  }
}

/** Fetches a whole document (release.yaml, channel.yaml), refusing more than maxBytes. */
export async function fetchDocument(
  url: URL,
  maxBytes: number,
  o: FetchOptions = {},
): Promise<Buffer> {
  const res = await get(url, {}, o);
  if (res.status !== 200) {
    discardBody(res.body);
    throw statusError(res.url, res.status);
  }
  const declared = Number(res.headers["content-length"] ?? NaN);
  const parts: Buffer[] = [];
  let n = 0;
  try {
    if (declared > maxBytes) throw tooLarge(url, declared, maxBytes);
    for await (const chunk of res.body) {
      n += (chunk as Buffer).length;
      if (n > maxBytes) throw tooLarge(url, n, maxBytes);
      parts.push(chunk as Buffer);
    }
  } catch (cause) {
    discardBody(res.body);
    throw fetchFailure(url, cause, o.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS);
  }
  return Buffer.concat(parts);
}

function tooLarge(url: URL, n: number, max: number): VerifyError {
  return new VerifyError(
    "LIKEN_VERIFY_DOCUMENT_TOO_LARGE",
    `GET ${url.href}: more than ${max} bytes (${n} so far); refused before parsing`,
    { context: { url: url.href, maxBytes: max } },
  );
}

export interface ArtifactStream {
  /** Bytes of the body to drop before the first wanted byte (a server that ignored Range). */
  skip: number;
  body: Body;
}

/**
 * Opens an artifact body from byte `start` of an artifact of `size` bytes. A 206 must start
 * where asked; a 200 (Range ignored) is accepted and the caller skips `start` bytes, so the
 * hash state stays exact. A declared length that disagrees with the size is refused before
 * a byte is read.
 */
export async function openArtifact(
  url: URL,
  start: number,
  size: number,
  o: FetchOptions = {},
): Promise<ArtifactStream> {
  const res = await get(url, start > 0 ? { range: `bytes=${start}-` } : {}, o);
  const fail = (e: VerifyError): never => {
    discardBody(res.body);
    throw e;
  };
  if (res.status !== 200 && res.status !== 206) fail(statusError(res.url, res.status));
  const length = res.headers["content-length"];
  const declared = typeof length === "string" ? Number(length) : undefined;
  let skip = 0;
  let expected = size - start;
  if (res.status === 206) {
    const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(String(res.headers["content-range"] ?? ""));
    if (!m || Number(m[1]) !== start) {
      fail(
        new VerifyError(
          "LIKEN_VERIFY_CONNECTION",
          `GET ${url.href}: asked for bytes from ${start}, the server sent Content-Range "${String(res.headers["content-range"])}"`,
          { retryable: true },
        ),
      );
    }
  } else {
    skip = start;
    expected = size;
  }
  if (declared !== undefined && declared !== expected) {
    const beyond = declared > expected;
    fail(
      new VerifyError(
        beyond ? "LIKEN_VERIFY_BEYOND_SIZE" : "LIKEN_VERIFY_SIZE_MISMATCH",
        `GET ${url.href}: the server declares ${declared} bytes from offset ${start - skip}, the release says ${expected}; ${beyond ? "more than the declared size" : "the artifact is truncated"}`,
        { context: { url: url.href, declared, expected } },
      ),
    );
  }
  return { skip, body: res.body };
}

/** Why a Range reply cannot be used for an adaptive download (the download then goes whole). */
export type RangeFault =
  | { kind: "ignored"; reason: string }
  | { kind: "capped"; reason: string }
  | { kind: "wrong-range"; reason: string }
  | { kind: "status"; reason: string };

/**
 * A range that spans the whole artifact may be answered with the whole of it (RFC 9110 allows
 * a 200 there; the test channel and some CDNs do): the body is exactly what was asked.
 */
function wholeAnswered(
  headers: Record<string, string | string[] | undefined>,
  from: number,
  to: number,
  size: number,
): boolean {
  const length = headers["content-length"];
  return from === 0 && to === size - 1 && (length === undefined || Number(length) === size);
}

/**
 * Checks a reply to `Range: bytes=from-to` (inclusive) of an artifact of `size` bytes: only a
 * 206 whose Content-Range names exactly those bytes of exactly that size, and whose length
 * agrees, is used. Pure: test/unit/range-reply.test.ts.
 */
export function checkRangeReply(
  status: number,
  headers: Record<string, string | string[] | undefined>,
  from: number,
  to: number,
  size: number,
): RangeFault | undefined {
  const asked = `bytes=${from}-${to}`;
  if (status === 200 && wholeAnswered(headers, from, to, size)) return undefined;
  if (status === 200) {
    return { kind: "ignored", reason: `the server ignored Range (HTTP 200 to ${asked})` };
  }
  if (status !== 206) return { kind: "status", reason: `HTTP ${status} to ${asked}` };
  const cr = String(headers["content-range"] ?? "");
  const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(cr);
  if (!m)
    return {
      kind: "wrong-range",
      reason: `Content-Range "${cr}" to ${asked} is not bytes a-b/size`,
    };
  const [a, b, total] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (total !== size) {
    return {
      kind: "wrong-range",
      reason: `Content-Range "${cr}" to ${asked} gives the artifact ${total} bytes, release.yaml says ${size}`,
    };
  }
  if (a === from && b < to && b >= a) {
    return {
      kind: "capped",
      reason: `the server caps ranges: asked ${asked} (${to - from + 1} bytes), got bytes ${a}-${b} (${b - a + 1})`,
    };
  }
  if (a !== from || b !== to) {
    return { kind: "wrong-range", reason: `Content-Range "${cr}" does not answer ${asked}` };
  }
  const length = headers["content-length"];
  if (typeof length === "string" && Number(length) !== to - from + 1) {
    return {
      kind: "wrong-range",
      reason: `Content-Length ${length} to ${asked} is not ${to - from + 1}`,
    };
  }
  return undefined;
}
