// `liken channel serve`: a small static HTTP server for the lab and tests (production uses
// any static server or CDN). GET and HEAD, single byte ranges (so downloads can resume),
// nothing outside the root directory.
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { ReleaseError } from "./build.js";

function parseRange(
  h: string | undefined,
  size: number,
): { start: number; end: number } | null | "bad" {
  if (h === undefined) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(h);
  if (!m || (m[1] === "" && m[2] === "")) return "bad";
  let start: number;
  let end: number;
  if (m[1] === "") {
    start = Math.max(0, size - Number(m[2]));
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  return start > end || start >= size ? "bad" : { start, end };
}

function contentType(file: string): string {
  return file.endsWith(".yaml") ? "application/yaml" : "application/octet-stream";
}

/** Told of every body sent: the path and its byte count (bench:delta counts requests with it). */
export type OnServed = (rel: string, bytes: number) => void;

async function handle(
  root: string,
  req: http.IncomingMessage,
  res: http.ServerResponse,
  onServed: OnServed,
): Promise<void> {
  if (req.method !== "GET" && req.method !== "HEAD") {
    res.writeHead(405, { allow: "GET, HEAD" }).end();
    return;
  }
  const rel = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname);
  const file = path.join(root, path.normalize(rel));
  if (!file.startsWith(root + path.sep)) {
    res.writeHead(404).end();
    return;
  }
  const st = await stat(file).catch(() => undefined);
  if (!st?.isFile()) {
    res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
    return;
  }
  const range = parseRange(req.headers.range, st.size);
  if (range === "bad") {
    res.writeHead(416, { "content-range": `bytes */${st.size}` }).end();
    return;
  }
  const { start, end } = range ?? { start: 0, end: st.size - 1 };
  const headers: http.OutgoingHttpHeaders = {
    "content-length": end - start + 1,
    "accept-ranges": "bytes",
    "content-type": contentType(file),
  };
  if (range) headers["content-range"] = `bytes ${start}-${end}/${st.size}`;
  res.writeHead(range ? 206 : 200, headers);
  // Counted as sent, whatever the client keeps: what a machine fetched, not what it wrote.
  onServed(rel, req.method === "HEAD" ? 0 : end - start + 1);
  if (req.method === "HEAD" || st.size === 0) {
    res.end();
    return;
  }
  // 1 MiB reads: a loopback download is not held back by 64 KiB syscalls.
  createReadStream(file, { start, end, highWaterMark: 1024 * 1024 }).pipe(res);
}

export interface ChannelServer {
  url: string;
  /**
   * Bytes sent so far for files under `prefix` (a path from the root, e.g. "/2026.10.10-001/"):
   * the lab and the tests show that a revert to a release a machine's other slot holds
   * downloads nothing.
   */
  bytesServed(prefix: string): number;
  close(): Promise<void>;
}

export async function serveChannel(
  dir: string,
  port = 0,
  host = "127.0.0.1",
  onServed?: OnServed,
): Promise<ChannelServer> {
  const root = path.resolve(dir);
  const st = await stat(root).catch(() => undefined);
  if (st?.isDirectory() !== true) {
    throw new ReleaseError(
      "LIKEN_RELEASE_SERVE_NO_DIR",
      `${dir} ${st === undefined ? "does not exist" : "is not a directory"}: serve the channel's directory (the one holding channel.yaml, built by liken release build --out DIR)`,
      { context: { dir } },
    );
  }
  const served = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const count: OnServed = (rel, bytes) => {
      served.set(rel, (served.get(rel) ?? 0) + bytes);
      onServed?.(rel, bytes);
    };
    handle(root, req, res, count).catch(() => res.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, resolve);
  });
  const addr = server.address() as AddressInfo;
  return {
    url: `http://${host}:${addr.port}`,
    bytesServed: (prefix) =>
      [...served].reduce((n, [p, b]) => (p.startsWith(prefix) ? n + b : n), 0),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
