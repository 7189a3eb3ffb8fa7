// Serves one prom-client Registry over HTTP at /metrics, for the operator and the agent
// alike (each owns its registry: src/operator/run/metrics.ts, src/agent/metrics.ts). The
// address is "host:port", ":port" (every interface) or "off"; port 0 picks a free port,
// and the URL actually bound is returned (and logged by the caller) so tests and the lab
// can scrape a process whose port they did not choose.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Registry } from "prom-client";
import { LikenError } from "../errors.js";

export type MetricsCode = "LIKEN_METRICS_ADDRESS_INVALID" | "LIKEN_METRICS_LISTEN_FAILED";

export class MetricsError extends LikenError {
  constructor(
    code: MetricsCode,
    message: string,
    opts: ConstructorParameters<typeof LikenError>[2] = {},
  ) {
    super(code, message, opts);
  }
}

export interface ListenAddress {
  /** Undefined: every interface (the ":8080" form). */
  host?: string;
  port: number;
}

/** "off" (or "") disables; ":8080", "0.0.0.0:8080", "127.0.0.1:0", "[::1]:9100" enable. */
export function parseMetricsAddress(text: string): ListenAddress | undefined {
  const t = text.trim();
  if (t === "" || t === "off") return undefined;
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]*)):(\d{1,5})$/.exec(t);
  const port = m === null ? NaN : Number(m[3]);
  if (m === null || port > 65535) {
    throw new MetricsError(
      "LIKEN_METRICS_ADDRESS_INVALID",
      `metrics address "${text}" is not host:port, :port or off (e.g. :8080, 127.0.0.1:9100)`,
      { context: { address: text } },
    );
  }
  const host = m[1] ?? m[2];
  return host === undefined || host === "" ? { port } : { host, port };
}

export interface MetricsServer {
  /** The URL of /metrics as bound (with the real port when 0 was asked). */
  url: string;
  close(): Promise<void>;
}

function urlOf(server: Server): string {
  const a = server.address() as AddressInfo;
  const host = a.family === "IPv6" ? `[${a.address}]` : a.address;
  return `http://${host === "[::]" ? "127.0.0.1" : host === "0.0.0.0" ? "127.0.0.1" : host}:${a.port}/metrics`;
}

export async function serveMetrics(registry: Registry, at: ListenAddress): Promise<MetricsServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method !== "GET" || path !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("liken serves /metrics only\n");
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { "content-type": registry.contentType }).end(text),
      (e: unknown) =>
        res
          .writeHead(500, { "content-type": "text/plain" })
          .end(`collecting failed: ${String(e)}\n`),
    );
  });
  // A scrape must never keep the process alive on its way out.
  server.unref();
  await new Promise<void>((resolve, reject) => {
    server.once("error", (e) =>
      reject(
        new MetricsError(
          "LIKEN_METRICS_LISTEN_FAILED",
          `cannot serve metrics on ${at.host ?? ""}:${at.port}: ${(e as Error).message}; ` +
            "choose another --metrics-address (or off)",
          { cause: e, context: { ...at } },
        ),
      ),
    );
    server.listen(at.port, at.host, () => resolve());
  });
  return {
    url: urlOf(server),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
