// A real HTTP server on 127.0.0.1 that serves a channel directory and misbehaves on demand:
// flips a bit, truncates, sends endless data, stalls, drops the connection, ignores Range,
// redirects, or answers 404/500. Every request is logged so tests can check what happened.
import { readFileSync, statSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";

export interface Fault {
  status?: number;
  redirect?: string;
  /** Flip the lowest bit of the byte at this artifact offset, for the first `times` bodies. */
  flip?: { at: number; times: number };
  /** Serve only this many bytes, with a consistent Content-Length. */
  truncateTo?: number;
  /** No Content-Length; after the file, garbage forever. */
  endless?: boolean;
  /** From this request to the path on (1 is the first), send headers and then nothing. */
  stallFromRequest?: number;
  /** Send this many body bytes, then hold the socket open and silent. */
  stallAfter?: number;
  /** Destroy the socket after this many body bytes, for the first `times` requests. */
  drop?: { after: number; times: number };
  ignoreRange?: boolean;
  /** Answer a closed range with at most this many bytes (a CDN that caps ranges). */
  capRange?: number;
  /** Send this Content-Range instead of the true one (the body stays what was asked). */
  contentRange?: string;
  /** Send the bytes this far after those asked for, under the true Content-Range. */
  shiftRange?: number;
  /** Bytes per second (sent in 16 KiB pieces). */
  throttle?: number;
}

export interface LoggedRequest {
  path: string;
  range: string | undefined;
  status: number;
}

export interface FaultServer {
  url: string;
  faults: Map<string, Fault>;
  log: LoggedRequest[];
  /** Forgets faults, the log and the per-path request counts. */
  reset(): void;
  close(): Promise<void>;
}

const PIECE = 16 * 1024;

function countFor(counts: Map<string, number>, key: string): number {
  const n = (counts.get(key) ?? 0) + 1;
  counts.set(key, n);
  return n;
}

/** The bytes to serve for a path, with the fault's truncation and bit flip applied. */
function content(root: string, rel: string, fault: Fault, n: number): Buffer | undefined {
  const file = path.join(root, rel);
  let data: Buffer;
  try {
    if (!statSync(file).isFile()) return undefined;
    data = readFileSync(file);
  } catch {
    return undefined;
  }
  if (fault.truncateTo !== undefined) data = data.subarray(0, fault.truncateTo);
  if (fault.flip && n <= fault.flip.times) {
    data = Buffer.from(data);
    data[fault.flip.at]! ^= 1;
  }
  return data;
}

/** The bytes a request asks for, with the range faults applied. */
function rangeOf(
  header: string | undefined,
  fault: Fault,
  length: number,
): { start: number; end: number; closed: boolean } {
  const m = /^bytes=(\d+)-(\d*)$/.exec(header ?? "");
  if (!m || fault.ignoreRange) return { start: 0, end: length - 1, closed: false };
  const start = Number(m[1]);
  // The range faults hit closed ranges only (adaptive downloads'), not a resume's open one.
  const closed = m[2] !== "";
  let end = closed ? Math.min(length - 1, Number(m[2])) : length - 1;
  if (closed && fault.capRange !== undefined) end = Math.min(end, start + fault.capRange - 1);
  return { start, end, closed };
}

/** The body and headers of a reply, with the range faults applied. */
function rangeReply(
  header: string | undefined,
  fault: Fault,
  data: Buffer,
): { body: Buffer; headers: http.OutgoingHttpHeaders; partial: boolean } {
  const { start, end, closed } = rangeOf(header, fault, data.length);
  const partial = start > 0 || end < data.length - 1;
  const shift = closed ? (fault.shiftRange ?? 0) : 0;
  const body = data.subarray(start + shift, end + 1 + shift);
  const headers: http.OutgoingHttpHeaders = fault.endless ? {} : { "content-length": body.length };
  if (partial) {
    const truth = `bytes ${start}-${end}/${data.length}`;
    headers["content-range"] = closed ? (fault.contentRange ?? truth) : truth;
  }
  return { body, headers, partial };
}

export async function startFaultServer(root: string): Promise<FaultServer> {
  const faults = new Map<string, Fault>();
  const log: LoggedRequest[] = [];
  const counts = new Map<string, number>();
  const sockets = new Set<import("node:net").Socket>();

  const server = http.createServer((req, res) => {
    const rel = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname);
    const fault = faults.get(rel) ?? {};
    const n = countFor(counts, rel);
    const entry: LoggedRequest = { path: rel, range: req.headers.range, status: 0 };
    log.push(entry);
    const reply = (status: number, headers: http.OutgoingHttpHeaders = {}) => {
      entry.status = status;
      res.writeHead(status, headers);
    };
    if (fault.status) return void (reply(fault.status), res.end("fault\n"));
    if (fault.redirect) return void (reply(302, { location: fault.redirect }), res.end());
    const data = content(root, rel, fault, n);
    if (!data) return void (reply(404), res.end("not found\n"));
    const { body, headers, partial } = rangeReply(req.headers.range, fault, data);
    reply(partial ? 206 : 200, headers);
    const dropAfter = fault.drop && n <= fault.drop.times ? fault.drop.after : Infinity;
    let sent = 0;
    const step = () => {
      if (res.destroyed) return;
      if (sent >= dropAfter) return void res.socket?.destroy();
      if (fault.stallAfter !== undefined && sent >= fault.stallAfter) return; // silent forever
      if (fault.stallFromRequest !== undefined && n >= fault.stallFromRequest) return;
      let piece: Buffer;
      if (sent < body.length) piece = body.subarray(sent, Math.min(sent + PIECE, body.length));
      else if (fault.endless) piece = Buffer.alloc(PIECE, 0x41);
      else return void res.end();
      const cut = Math.min(piece.length, dropAfter - sent, (fault.stallAfter ?? Infinity) - sent);
      piece = piece.subarray(0, cut);
      sent += piece.length;
      const more = res.write(piece);
      const next = () =>
        fault.throttle
          ? setTimeout(step, (piece.length / fault.throttle) * 1000)
          : setImmediate(step);
      if (more) next();
      else res.once("drain", next);
    };
    step();
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    faults,
    log,
    reset: () => {
      faults.clear();
      log.length = 0;
      counts.clear();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
