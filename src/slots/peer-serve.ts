// Serving peers (docs/peers.md): an agent that holds a release verified serves its artifacts'
// bytes to the other machines of the cluster, over plain HTTP with single Range requests:
//
//   GET /v1/releases/<release digest hex>/<artifact>   Range: bytes=<from>-<to>
//   GET /v1/releases/<release digest hex>/<artifact>/index   (its chunk index, kept)
//
// Only a release the caller trusts (the Cluster's catalog) and that a slot holds verified is
// served: the slot's recorded release.yaml has that digest and the slot is staged or running.
// The device is opened read-only for each request. Everything sent passes through one token
// bucket, so serving never takes more than its rate from the node's links and disks. A reader
// checks every chunk against the signed index anyway; the server's checks only keep it from
// serving what it does not hold.
//
// What a connection may cost the agent is bounded (docs/peers.md, "Serving"): at most
// MAX_PEER_CONNECTIONS at once, each holding one piece in memory (a range and the chunk index
// alike are read from disk piece by piece, never whole), and a socket that neither reads nor
// sends for PEER_SERVE_IDLE_MS is closed.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createHash } from "node:crypto";
import { access, open } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { setTimeout as delay } from "node:timers/promises";
import { digestOf } from "../verify/digest.js";
import { indexFromSlot } from "./index-from-slot.js";
import { parseRelease } from "../verify/release.js";
import type { SlotName } from "./config.js";
import { checkPeerRate, PEER_PIECE } from "./peer-rate.js";
import type { SlotStore } from "./store.js";

/** What one request may read: a device region, already checked to hold the release verified. */
export interface Served {
  device: string;
  offset: number;
  size: number;
  /**
   * The artifact's chunk index as kept with the slot: its file and the digest release.yaml
   * gives it. The server checks the digest as it streams the file (./peer-serve.ts sendIndex).
   */
  index: () => Promise<{ file: string; digest: string } | undefined>;
}

/** Finds the slot region serving (release digest, artifact), or says why there is none. */
export type Resolve = (
  releaseDigest: string,
  artifact: string,
) => Promise<Served | { refused: PeerRefusal; detail: string }>;

/** Why a peer answers 4xx: a closed union, each documented in docs/peers.md. */
export type PeerRefusal =
  "not-trusted" | "not-held" | "no-artifact" | "no-index" | "bad-request" | "bad-range";

const STATUS: Record<PeerRefusal, number> = {
  "not-trusted": 403,
  "not-held": 404,
  "no-artifact": 404,
  "no-index": 404,
  "bad-request": 400,
  "bad-range": 416,
};

/**
 * Slots that hold `releaseDigest` verified: its recorded release.yaml has that digest, and the
 * slot is staged (read back after writing) or is the running one. `trusted` is the Cluster's
 * catalog: a release it does not name is refused even if a slot holds it.
 */
export function resolveFromStore(
  store: SlotStore,
  running: SlotName,
  trusted: (releaseDigest: string) => boolean,
): Resolve {
  /** Indexes being made again from their slots, so that concurrent readers make each once. */
  const remaking = new Map<string, Promise<void>>();
  return async (digest, artifact) => {
    if (!trusted(digest))
      return {
        refused: "not-trusted",
        detail: `release ${digest} is not in the Cluster's catalog`,
      };
    for (const slot of ["a", "b"] as const) {
      const doc = await store.release(slot);
      if (doc === undefined || digestOf(doc) !== digest) continue;
      if (slot !== running && (await store.marker(slot)).state !== "staged") continue;
      const a = parseRelease(doc).artifacts.find((x) => x.name === artifact);
      if (a === undefined)
        return { refused: "no-artifact", detail: `release ${digest} has no artifact ${artifact}` };
      const index = async (): Promise<{ file: string; digest: string } | undefined> => {
        if (a.index === undefined) return undefined;
        const file = store.keptIndexFile(slot, artifact);
        if (
          !(await access(file).then(
            () => true,
            () => false,
          ))
        ) {
          // Written in full, the slot kept none: made again from its bytes once (./index-from-slot.ts).
          const key = `${slot}/${digest}/${artifact}`;
          let making = remaking.get(key);
          if (making === undefined) {
            const want = { device: store.device(slot), offset: a.offset, size: a.size };
            making = indexFromSlot({ ...want, digest: a.index.digest })
              .then(async (bytes) => {
                if (bytes !== undefined) await store.keepIndex(slot, artifact, bytes);
              })
              .finally(() => remaking.delete(key));
            remaking.set(key, making);
          }
          await making.catch(() => undefined);
        }
        return { file, digest: a.index.digest };
      };
      return { device: store.device(slot), offset: a.offset, size: a.size, index };
    }
    return { refused: "not-held", detail: `no slot here holds release ${digest} verified` };
  };
}

/**
 * A token bucket over bytes: at most `rate` bytes a second, bursts up to one second's worth.
 * Shared by every request, so ten readers share the rate, they do not get ten times it.
 */
export class ByteBucket {
  private tokens: number;
  private at = Date.now();

  constructor(private readonly rate: number) {
    this.tokens = rate;
  }

  /** Resolves when `n` bytes may be sent. */
  async take(n: number): Promise<void> {
    for (;;) {
      const now = Date.now();
      this.tokens = Math.min(this.rate, this.tokens + ((now - this.at) / 1000) * this.rate);
      this.at = now;
      if (this.tokens >= n) {
        this.tokens -= n;
        return;
      }
      await delay(Math.ceil(((n - this.tokens) / this.rate) * 1000));
    }
  }
}

const PIECE = PEER_PIECE;

/**
 * Connections served at once. The operator gives a holder at most 4 downloaders as their main
 * source and a few more as a spare (src/operator/peers/sources-status.ts), and a download opens
 * one connection per artifact at a time: 32 leaves room for all of them, and keeps what stalled
 * readers can hold to 32 pieces of 64 KiB plus their sockets' buffers. One more is closed at once;
 * its downloader drops this peer (unreachable) and takes the chunks from its next source.
 */
export const MAX_PEER_CONNECTIONS = 32;

/**
 * A socket that neither reads nor takes a byte for this long is closed: a reader on the cluster's
 * network stalls after 5 s (PEER_IDLE_TIMEOUT_MS in ./seeded.ts) and has moved on long before;
 * 30 s also leaves a reader waiting on the shared bucket (32 readers at 64 KiB/s: 32 s at worst
 * for one piece) mostly unharmed.
 */
export const PEER_SERVE_IDLE_MS = 30_000;

export interface PeerServerOptions {
  resolve: Resolve;
  /** Bytes a second for everything served (agent.yaml's peers.rateBytesPerSecond). */
  rate: number;
  port: number;
  host?: string;
  /** Hears each piece of a body as it is sent (the agent's served-bytes metric). */
  onSent?: (n: number) => void;
  /** MAX_PEER_CONNECTIONS unless given (tests). */
  maxConnections?: number;
  /** PEER_SERVE_IDLE_MS unless given (tests). */
  idleMs?: number;
}

export interface PeerServer {
  url: string;
  /** Bytes sent in bodies since start. */
  served(): number;
  /** The connections open now (the idle timer and the connection cap are seen by it). */
  connections(): Promise<number>;
  close(): Promise<void>;
}

const PATH = /^\/v1\/releases\/([0-9a-f]{64})\/([^/]+?)(\/index)?$/;

function parseRange(h: string | undefined, size: number): [number, number] | undefined | "bad" {
  if (h === undefined) return undefined;
  const m = /^bytes=(\d+)-(\d*)$/.exec(h);
  if (!m) return "bad";
  const from = Number(m[1]);
  const to = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  return from > to || from >= size ? "bad" : [from, to];
}

function refuse(res: ServerResponse, why: PeerRefusal, detail: string): void {
  res.writeHead(STATUS[why], { "content-type": "application/json" });
  res.end(JSON.stringify({ code: `LIKEN_PEER_${why.toUpperCase().replace("-", "_")}`, detail }));
}

/** Until the reply can take more, or the reader went away (the loop ends on res.destroyed). */
function drained(res: ServerResponse): Promise<void> {
  return new Promise((r) => {
    const done = (): void => {
      res.off("drain", done);
      res.off("close", done);
      r();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}

/** Sends bodies through the shared bucket, counting what was sent. */
class Pacer {
  sent = 0;
  constructor(
    private readonly bucket: ByteBucket,
    private readonly onSent: (n: number) => void = () => {},
  ) {}

  async write(res: ServerResponse, piece: Buffer): Promise<void> {
    await this.bucket.take(piece.length);
    this.sent += piece.length;
    this.onSent(piece.length);
    if (!res.write(piece)) await drained(res);
  }
}

/**
 * Streams the kept index piece by piece, hashing as it goes: a file whose digest turns out not
 * to be release.yaml's is cut off before its end (the reader sees a short body and takes the
 * index elsewhere). A whole index is tens of MiB for a large image; a copy per connection is
 * what a handful of stalled readers would otherwise hold.
 */
async function sendIndex(res: ServerResponse, found: Served, pacer: Pacer): Promise<void> {
  const index = await found.index();
  const fh = index === undefined ? undefined : await open(index.file, "r").catch(() => undefined);
  if (index === undefined || fh === undefined)
    return refuse(res, "no-index", "this machine kept no chunk index of that artifact");
  try {
    const { size } = await fh.stat();
    res.writeHead(200, {
      "content-type": "application/octet-stream",
      "content-length": String(size),
    });
    const h = createHash("sha256");
    for (let at = 0; at < size && !res.destroyed;) {
      const buf = Buffer.allocUnsafe(Math.min(PIECE, size - at));
      const { bytesRead } = await fh.read(buf, 0, buf.length, at);
      if (bytesRead < buf.length) throw new Error(`${index.file}: short read at ${at}`);
      h.update(buf);
      at += bytesRead;
      // The last piece goes only when the whole file is the index release.yaml names.
      if (at === size && `sha256:${h.digest("hex")}` !== index.digest) {
        res.destroy();
        return;
      }
      await pacer.write(res, buf);
    }
    res.end();
  } finally {
    await fh.close();
  }
}

async function sendRange(
  req: IncomingMessage,
  res: ServerResponse,
  found: Served,
  pacer: Pacer,
): Promise<void> {
  const range = parseRange(req.headers.range, found.size);
  if (range === "bad") {
    res.setHeader("content-range", `bytes */${found.size}`);
    return refuse(
      res,
      "bad-range",
      `${req.headers.range} is not one range within ${found.size} bytes`,
    );
  }
  const [from, to] = range ?? [0, found.size - 1];
  res.writeHead(range ? 206 : 200, {
    "content-type": "application/octet-stream",
    "content-length": String(to - from + 1),
    "accept-ranges": "bytes",
    ...(range ? { "content-range": `bytes ${from}-${to}/${found.size}` } : {}),
  });
  // Read-only: serving never opens a slot for writing.
  const fh = await open(found.device, "r");
  try {
    for (let at = from; at <= to && !res.destroyed;) {
      const n = Math.min(PIECE, to - at + 1);
      const buf = Buffer.allocUnsafe(n);
      const { bytesRead } = await fh.read(buf, 0, n, found.offset + at);
      if (bytesRead < n) throw new Error(`${found.device}: short read at ${found.offset + at}`);
      at += n;
      await pacer.write(res, buf);
    }
    res.end();
  } finally {
    await fh.close();
  }
}

export async function startPeerServer(o: PeerServerOptions): Promise<PeerServer> {
  const low = checkPeerRate(o.rate);
  if (low !== undefined) throw low;
  const pacer = new Pacer(new ByteBucket(o.rate), o.onSent);
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const m = PATH.exec(req.url ?? "");
    if (req.method !== "GET" || !m)
      return refuse(
        res,
        "bad-request",
        "GET /v1/releases/<release digest hex>/<artifact>[/index] only",
      );
    const found = await o.resolve(`sha256:${m[1]}`, decodeURIComponent(m[2]!));
    if ("refused" in found) return refuse(res, found.refused, found.detail);
    return m[3] !== undefined ? sendIndex(res, found, pacer) : sendRange(req, res, found, pacer);
  };
  const idleMs = o.idleMs ?? PEER_SERVE_IDLE_MS;
  const server: Server = createServer(
    // A reader has the idle time to send its request line and headers, and as long as it
    // keeps reading to take the body; keep-alive between requests is short.
    { headersTimeout: idleMs, requestTimeout: idleMs, keepAliveTimeout: 5_000 },
    (req, res) => {
      handle(req, res).catch(() => res.destroy());
    },
  );
  server.maxConnections = o.maxConnections ?? MAX_PEER_CONNECTIONS;
  // No byte either way for idleMs (a reader that stopped reading: the socket's buffers are full
  // and nothing moves): the socket is destroyed, its pending write's wait ends (drained), and
  // the request's file handle is closed.
  server.setTimeout(idleMs, (socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port, o.host ?? "0.0.0.0", () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://${o.host === undefined || o.host === "0.0.0.0" || o.host === "::" ? "127.0.0.1" : o.host}:${port}/`,
    served: () => pacer.sent,
    connections: () =>
      new Promise<number>((res, rej) => server.getConnections((e, n) => (e ? rej(e) : res(n)))),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
