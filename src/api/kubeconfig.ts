// Loading a kubeconfig, with connections to the API server kept open and reused.
//
// @kubernetes/client-node 1.x builds a new https.Agent for every request (KubeConfig's
// createAgent runs in applySecurityAuthentication), so every call pays a TCP connect and a
// full TLS handshake, on both ends, and nothing is ever reused. An operator that grants 100
// turns in a burst, or 1,000 agents renewing Leases, spend most of their CPU and most of the
// API server's on handshakes that way (docs/adr/api-connection-reuse.md). This module gives
// each KubeConfig one keep-alive agent per distinct TLS identity (server, CA, client
// certificate), so a client certificate that rotates on disk still gets a fresh agent, and
// a proxy configuration keeps the library's own behaviour.
import http from "node:http";
import https from "node:https";
import { KubeConfig } from "@kubernetes/client-node";
import { existsSync } from "node:fs";
import path from "node:path";
import { API_ERROR_CODES, ApiError } from "./errors.js";

/** What client-node passes to its (private) createAgent. */
type CreateAgent = (
  cluster: { server?: string; proxyUrl?: string; skipTLSVerify?: boolean } | null,
  options: https.AgentOptions,
) => http.Agent;

const REUSING = Symbol("liken.reusesConnections");

/**
 * A kept connection that carried nothing for this long is closed by liken. A third of
 * kube-apiserver's own idle timeout (90 s, `IdleTimeout` in k8s.io/apiserver
 * pkg/server/secure_serving.go), so the client always closes an idle connection before the
 * server does and never writes a request into one the server is closing; and a connection
 * that broke while idle (the server restarted behind a relay, a NAT forgot it) is not reused
 * once it has idled this long. Reuse within it still saves the handshakes that matter: a
 * burst of status writes, Lease renewals every few seconds.
 */
export const IDLE_TIMEOUT_MS = 30_000;

/**
 * A request (not a watch) that has had no whole answer this long is aborted, and fails as
 * LIKEN_API_UNAVAILABLE like any request the server did not answer. kube-apiserver ends every
 * request that is not long-running at 60 s itself (`--request-timeout`, default 1m0s), so past
 * that no answer is coming: the connection died under it (a half-open socket, a relay that
 * dropped it). Without a deadline such a request waits forever, and whatever waits on it with
 * it: one status write hung that way would stop every later pass of cluster-operator.
 */
export const REQUEST_TIMEOUT_MS = 70_000;

export interface ReuseOptions {
  /** Close a kept connection after this long unused (ms); default IDLE_TIMEOUT_MS. */
  idleTimeoutMs?: number;
  /**
   * At most this many connections at once; more requests wait for a free one. Only for a
   * KubeConfig that opens no watch (a watch holds its connection for as long as it runs, and
   * enough of them would starve every request): e.g. the operator's Events, which a wave's
   * end makes by the hundred at once. Default: no cap.
   */
  maxSockets?: number;
  /** Abort a request (not a watch) unanswered after this long (ms); default REQUEST_TIMEOUT_MS. */
  requestTimeoutMs?: number;
}

/** What client-node calls on its authentication method before each request of an API class. */
interface SignalContext {
  getSignal(): AbortSignal | undefined;
  setSignal(signal: AbortSignal): void;
}
type ApplyAuthentication = (context: SignalContext) => Promise<void>;

/** The fields of an agent's options that decide which connections may be shared. */
function identity(server: string | undefined, o: https.AgentOptions): string {
  const text = (v: unknown): string =>
    v === undefined ? "" : Buffer.isBuffer(v) ? v.toString("base64") : String(v);
  return [server, o.ca, o.cert, o.key, o.pfx, o.passphrase, o.rejectUnauthorized, o.servername]
    .map(text)
    .join("\u0000");
}

/**
 * Makes every client built from `kc` (API classes, watches, informers) reuse keep-alive
 * connections, and gives each request of an API class a deadline. Idempotent; returns `kc`.
 */
export function reuseConnections(kc: KubeConfig, opts: ReuseOptions = {}): KubeConfig {
  const target = kc as unknown as { createAgent: CreateAgent; [REUSING]?: true };
  if (target[REUSING]) return kc;
  // Node's agent puts this timeout on its free sockets and destroys one that reaches it; on a
  // socket in use (a watch waiting for events) it only emits 'timeout', which nothing here
  // acts on, so a quiet watch stays open.
  const timeout = opts.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
  const original = target.createAgent.bind(kc);
  const agents = new Map<string, http.Agent>();
  target.createAgent = (cluster, options) => {
    if (cluster?.proxyUrl) return original(cluster, options);
    const key = identity(cluster?.server, options);
    let agent = agents.get(key);
    if (agent === undefined) {
      // Whatever the library would have built (http for an insecure http: server), with
      // keep-alive on. No cap on sockets: a watch holds one for as long as it runs.
      const made = original(cluster, options);
      const cap = opts.maxSockets === undefined ? {} : { maxSockets: opts.maxSockets };
      agent =
        made instanceof https.Agent
          ? new https.Agent({
              ...made.options,
              keepAlive: true,
              scheduling: "lifo",
              timeout,
              ...cap,
            })
          : new http.Agent({ keepAlive: true, scheduling: "lifo", timeout, ...cap });
      made.destroy();
      agents.set(key, agent);
    }
    return agent;
  };
  // Every request of an API class gets a deadline, unless its caller gave it a signal of its
  // own (a middleware's signal replaces this one: it is applied after). Watches do not pass
  // here (client-node's Watch builds its request from applyToFetchOptions).
  const requestTimeoutMs = opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  const auth = kc as unknown as { applySecurityAuthentication: ApplyAuthentication };
  const authenticate = auth.applySecurityAuthentication.bind(kc);
  auth.applySecurityAuthentication = async (context) => {
    await authenticate(context);
    if (context.getSignal() === undefined) {
      context.setSignal(AbortSignal.timeout(requestTimeoutMs));
    }
  };
  target[REUSING] = true;
  return kc;
}

/** From a kubeconfig file, or the default (KUBECONFIG, ~/.kube/config, in-cluster). */
export function loadKubeConfig(file?: string, opts: ReuseOptions = {}): KubeConfig {
  const kc = new KubeConfig();
  checkKubeconfigFiles(file);
  if (file === undefined) kc.loadFromDefault();
  else kc.loadFromFile(file);
  return reuseConnections(kc, opts);
}

/**
 * A kubeconfig named (by --kubeconfig or KUBECONFIG) that does not exist is a typo to name,
 * not an ENOENT from deep in the client library. No name at all keeps the library's default
 * (~/.kube/config, then in-cluster).
 */
export function checkKubeconfigFiles(file?: string, env = process.env): void {
  const named =
    file !== undefined
      ? [{ from: "--kubeconfig", files: [file] }]
      : (env.KUBECONFIG ?? "") !== ""
        ? [{ from: "KUBECONFIG", files: env.KUBECONFIG!.split(path.delimiter).filter(Boolean) }]
        : [];
  for (const { from, files } of named) {
    const missing = files.filter((f) => !existsSync(f));
    if (missing.length > 0) {
      throw new ApiError(
        API_ERROR_CODES.kubeconfig,
        `${from} names ${missing.join(", ")}, which does not exist: point ${from} at the cluster's kubeconfig file`,
        { context: { from, missing } },
      );
    }
  }
}
