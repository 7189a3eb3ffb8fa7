// The eviction webhook of cluster-operator, as one object the operator command starts and
// stops: TLS material from the shared Secret, the HTTPS server, and the registration kept
// pointed at it. Set-up runs in the background and retries, so the operator's own start is
// not delayed; until the webhook serves, the API server refuses agents' evictions
// (failurePolicy: Fail), which is the safe side.
//
// The switch between the two ways the API server reaches the webhook (docs/operator.md):
//   Service (default)  config/webhook/'s Service cluster-operator-webhook in liken-system, in
//                      front of every copy's --webhook-listen port (the Deployment: :9443);
//   URL (--webhook-url) the API server calls that URL; for an API server outside the
//                      cluster's network, as in the lab and the tests, where it runs on loopback.
import type { Server } from "node:https";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "../logger.js";
import { WebhookError } from "./errors.js";
import { DEFAULT_WEBHOOK_PORT, servingHosts } from "./names.js";
import { ensureRegistration } from "./registration.js";
import { createWebhookServer, FactReader } from "./server.js";
import { ensureTlsMaterial } from "./tls-secret.js";

export { WEBHOOK_CONFIGURATION, EVICTION_PATH, DEFAULT_WEBHOOK_PORT } from "./names.js";

export interface WebhookOptions {
  /** "host:port" to listen on ("0.0.0.0:9443" in the Deployment; port 0 picks one). */
  listen: string;
  /** Register this URL instead of the Service (URL mode). */
  url?: string;
  log: Logger;
  /** How often the registration is checked again (someone re-applied config/, say). */
  recheckMs?: number;
}

/** Retry pace of the background set-up: quick at first, then every 10 s. */
const RETRY_MS = [500, 1000, 2000, 5000, 10_000];
const RECHECK_MS = 60_000;

export function parseListen(text: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(text.trim());
  const port = Number(m?.[3]);
  if (m === null || !Number.isInteger(port) || port > 65535) {
    throw new WebhookError(
      "LIKEN_WEBHOOK_USAGE",
      `--webhook-listen "${text}" is not host:port (e.g. 0.0.0.0:${DEFAULT_WEBHOOK_PORT}, 127.0.0.1:0)`,
    );
  }
  return { host: m[1] ?? (m[2] || "0.0.0.0"), port };
}

export class EvictionWebhook {
  private server: Server | undefined;
  private stopped = false;
  private readonly abort = new AbortController();
  /** Resolves once the webhook serves and its registration was written or found right. */
  readonly ready: Promise<void>;
  private resolveReady!: () => void;

  constructor(
    private readonly kc: KubeConfig,
    private readonly opts: WebhookOptions,
  ) {
    this.ready = new Promise((r) => (this.resolveReady = r));
    parseListen(opts.listen); // a bad flag fails the start, not the background
  }

  /** The port the server listens on (after ready). */
  get port(): number | undefined {
    return (this.server?.address() as AddressInfo | null)?.port;
  }

  /** Starts the background set-up; never throws (it logs and retries). */
  start(): void {
    void this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    const s = this.server;
    if (s === undefined) return;
    await new Promise<void>((resolve) => {
      s.close(() => resolve());
      s.closeAllConnections();
    });
  }

  private async retrying<T>(what: string, fn: () => Promise<T>): Promise<T | undefined> {
    for (let attempt = 0; !this.stopped; attempt++) {
      try {
        return await fn();
      } catch (e) {
        const ms = RETRY_MS[Math.min(attempt, RETRY_MS.length - 1)]!;
        const code = e instanceof WebhookError ? e.code : undefined;
        this.opts.log.warn(
          { code, err: e instanceof Error ? e.message : String(e), retryInMs: ms },
          `eviction webhook: ${what} failed; agents' evictions are refused until it works`,
        );
        await sleep(ms, undefined, { signal: this.abort.signal }).catch(() => undefined);
      }
    }
    return undefined;
  }

  private async run(): Promise<void> {
    const { host, port } = parseListen(this.opts.listen);
    const urlHost =
      this.opts.url === undefined ? [] : [new URL(this.opts.url).hostname.replace(/^\[|\]$/g, "")];
    const tls = await this.retrying("reading its certificate", () =>
      ensureTlsMaterial(this.kc, servingHosts(urlHost)),
    );
    if (tls === undefined) return;
    const server = createWebhookServer(tls, new FactReader(this.kc), this.opts.log);
    const listening = await this.retrying("listening", () => listen(server, host, port));
    if (listening !== "listening") return;
    this.server = server;
    this.opts.log.info(
      { listen: `${host}:${this.port}`, url: this.opts.url ?? "(the Service)" },
      "eviction webhook serving",
    );
    for (let first = true; !this.stopped; first = false) {
      const r = await this.retrying("registering", () =>
        ensureRegistration(this.kc, tls.caCert, this.opts.url),
      );
      if (r === "updated") this.opts.log.info({}, "eviction webhook: registration updated");
      if (first) this.resolveReady();
      await sleep(this.opts.recheckMs ?? RECHECK_MS, undefined, {
        signal: this.abort.signal,
      }).catch(() => undefined);
    }
  }
}

function listen(server: Server, host: string, port: number): Promise<"listening"> {
  return new Promise((resolve, reject) => {
    const onError = (e: Error): void => {
      server.off("listening", onListening);
      reject(
        new WebhookError("LIKEN_WEBHOOK_LISTEN", `cannot listen on ${host}:${port}: ${e.message}`, {
          retryable: true,
          cause: e,
        }),
      );
    };
    const onListening = (): void => {
      server.off("error", onError);
      resolve("listening");
    };
    server.once("error", onError);
    server.once("listening", onListening);
    server.listen(port, host);
  });
}
