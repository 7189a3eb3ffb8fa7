// A small Kubernetes REST client over node:https, for the agent: JSON GET/POST/PUT and watch
// streams over one keep-alive connection, authenticated as the kubeconfig says.
//
// Why not @kubernetes/client-node here: importing it takes a Node process from ~39 to ~110 MiB
// of RSS (its generated models and every auth plugin load at once; even KubeConfig alone pulls
// them in), and the agent runs on every machine of the fleet. The agent asks the API server
// for a handful of things (its Machine, its Cluster, its Node, its Lease): plain JSON over
// HTTPS. client-node stays the client for everything else, including the agent's drain, which
// loads it only when a turn is held. docs/adr/agent-lean-api-client.md.
//
// Kubeconfig support is what a machine's agent uses: client certificates and tokens (inline,
// in files, or a token file re-read as it rotates), a CA, insecure-skip-tls-verify, and the
// in-cluster ServiceAccount. exec plugins and auth-providers are refused with a message.
import { readFileSync } from "node:fs";
import https from "node:https";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { parse } from "yaml";
import { ApiError, API_ERROR_CODES, toApiError, type ApiOperation } from "./errors.js";

export interface RestConfig {
  server: string;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  token?: string;
  tokenFile?: string;
  insecure?: boolean;
  tlsServerName?: string;
}

/** A request that gets no answer this long is abandoned (watches have no such limit). */
const REQUEST_TIMEOUT_MS = 30_000;
/** How often a token file is read again (bound ServiceAccount tokens rotate hourly). */
const TOKEN_REREAD_MS = 60_000;
const IN_CLUSTER_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

interface KubeconfigFile {
  "current-context"?: string;
  clusters?: { name: string; cluster: Record<string, unknown> }[];
  users?: { name: string; user: Record<string, unknown> }[];
  contexts?: { name: string; context: { cluster: string; user: string } }[];
}

function usage(message: string): ApiError {
  return new ApiError(API_ERROR_CODES.usage, message);
}

/** The agent's kubeconfig: `file`, else KUBECONFIG, else ~/.kube/config, else in-cluster. */
export function loadRestConfig(file?: string): RestConfig {
  const candidates = file
    ? [file]
    : [
        ...(process.env.KUBECONFIG?.split(path.delimiter).filter(Boolean) ?? []),
        path.join(os.homedir(), ".kube", "config"),
      ];
  for (const f of candidates) {
    let text: string;
    try {
      text = readFileSync(f, "utf8");
    } catch (e) {
      if (file !== undefined) throw usage(`kubeconfig ${f}: ${(e as Error).message}`);
      continue;
    }
    return fromKubeconfig(parse(text) as KubeconfigFile, path.dirname(f), f);
  }
  const host = process.env.KUBERNETES_SERVICE_HOST;
  if (host === undefined) {
    throw usage(
      "no kubeconfig: name one in the agent config (kubeconfig:), set KUBECONFIG, or run in a cluster",
    );
  }
  const port = process.env.KUBERNETES_SERVICE_PORT ?? "443";
  return {
    server: `https://${host.includes(":") ? `[${host}]` : host}:${port}`,
    ca: readFileSync(path.join(IN_CLUSTER_DIR, "ca.crt")),
    tokenFile: path.join(IN_CLUSTER_DIR, "token"),
  };
}

function fromKubeconfig(k: KubeconfigFile, dir: string, file: string): RestConfig {
  const { contexts = [], clusters = [], users = [] } = k;
  const ctxName = k["current-context"] ?? contexts[0]?.name;
  const ctx = contexts.find((c) => c.name === ctxName)?.context;
  const cluster = clusters.find((c) => c.name === ctx?.cluster)?.cluster;
  const user = users.find((u) => u.name === ctx?.user)?.user ?? {};
  if (ctx === undefined || cluster === undefined || typeof cluster.server !== "string") {
    throw usage(`kubeconfig ${file}: no current context with a cluster and its server`);
  }
  if (user.exec !== undefined || user["auth-provider"] !== undefined) {
    throw usage(
      `kubeconfig ${file}: the agent authenticates with a client certificate or a token; ` +
        "exec plugins and auth-providers are not supported (docs/agent.md)",
    );
  }
  return { server: cluster.server.replace(/\/+$/, ""), ...credentials(cluster, user, dir) };
}

/** The TLS and token fields of a kubeconfig's cluster and user, files read now. */
function credentials(
  cluster: Record<string, unknown>,
  user: Record<string, unknown>,
  dir: string,
): Omit<RestConfig, "server"> {
  const bytes = (data: unknown, ref: unknown): Buffer | undefined => {
    if (typeof data === "string") return Buffer.from(data, "base64");
    if (typeof ref === "string") return readFileSync(path.resolve(dir, ref));
    return undefined;
  };
  const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
  const fields: Omit<RestConfig, "server"> = {
    ca: bytes(cluster["certificate-authority-data"], cluster["certificate-authority"]),
    cert: bytes(user["client-certificate-data"], user["client-certificate"]),
    key: bytes(user["client-key-data"], user["client-key"]),
    token: str(user.token),
    tokenFile: str(user.tokenFile) && path.resolve(dir, str(user.tokenFile)!),
    insecure: cluster["insecure-skip-tls-verify"] === true,
    tlsServerName: str(cluster["tls-server-name"]),
  };
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as Omit<
    RestConfig,
    "server"
  >;
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  op: ApiOperation;
}

export type WatchPhase = "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR";

/** JSON over one keep-alive HTTPS connection (a watch holds one more while it runs). */
export class Rest {
  private agent: http.Agent;
  private readonly base: URL;
  private token: { value: string; readAt: number } | undefined;
  /** Requests started (watches included), for tests and the bench. */
  requests = 0;
  /** Told each answer's HTTP status (identity.ts counts 401s in a row: a refused certificate). */
  private readonly listeners = new Set<(status: number) => void>();

  constructor(
    private cfg: RestConfig,
    private readonly userAgent = "liken-agent",
  ) {
    this.base = new URL(cfg.server);
    this.agent = this.makeAgent();
  }

  /** The server, CA and credentials requests go out with now. */
  get config(): Readonly<RestConfig> {
    return this.cfg;
  }

  private makeAgent(): http.Agent {
    const cfg = this.cfg;
    return this.base.protocol === "http:"
      ? new http.Agent({ keepAlive: true })
      : new https.Agent({
          keepAlive: true,
          scheduling: "lifo",
          ...(cfg.ca ? { ca: cfg.ca } : {}),
          ...(cfg.cert ? { cert: cfg.cert } : {}),
          ...(cfg.key ? { key: cfg.key } : {}),
          ...(cfg.tlsServerName ? { servername: cfg.tlsServerName } : {}),
          rejectUnauthorized: cfg.insecure !== true,
        });
  }

  /**
   * Authenticates every request from now on with this client certificate and key (a renewed
   * machine certificate, docs/machine.md "Identity"). What runs keeps running: TLS checks a
   * client certificate at the handshake only, so a watch opened with the old certificate
   * goes on over its connection until it ends by itself. The old connections are not reused:
   * the idle ones close now, each busy one when its request ends.
   */
  useClientCertificate(cert: Buffer, key: Buffer): void {
    const old = this.agent;
    this.cfg = { ...this.cfg, cert, key };
    this.agent = this.makeAgent();
    old.on("free", (socket: { destroy(): void }) => socket.destroy());
    for (const sockets of Object.values(old.freeSockets))
      for (const s of sockets ?? []) s.destroy();
  }

  /** Tells `fn` the HTTP status of every answer from now on, a watch's first line's included. */
  onAnswer(fn: (status: number) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private answered(status: number): void {
    for (const fn of this.listeners) fn(status);
  }

  private bearer(): string | undefined {
    const c = this.cfg;
    if (c.tokenFile !== undefined) {
      if (this.token === undefined || Date.now() - this.token.readAt > TOKEN_REREAD_MS) {
        const value = readFileSync(c.tokenFile, "utf8").trim();
        this.token = { value, readAt: Date.now() };
      }
      return this.token.value;
    }
    return c.token;
  }

  private url(p: string, query: RequestOptions["query"] = {}): URL {
    const u = new URL(p, this.base);
    for (const [k, v] of Object.entries(query)) if (v !== undefined) u.searchParams.set(k, `${v}`);
    return u;
  }

  private send(
    method: string,
    u: URL,
    body: string | undefined,
    timeoutMs: number | undefined,
  ): Promise<http.IncomingMessage> {
    this.requests++;
    const token = this.bearer();
    const mod = u.protocol === "http:" ? http : https;
    return new Promise((resolve, reject) => {
      const req = mod.request(u, {
        method,
        agent: this.agent,
        headers: {
          accept: "application/json",
          "user-agent": this.userAgent,
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...(body !== undefined
            ? { "content-type": "application/json", "content-length": Buffer.byteLength(body) }
            : {}),
        },
      });
      if (timeoutMs !== undefined) {
        req.setTimeout(timeoutMs, () =>
          req.destroy(new Error(`no answer within ${timeoutMs / 1000} s`)),
        );
      }
      req.once("response", resolve);
      req.once("error", reject);
      req.end(body);
    });
  }

  /** One request; the parsed JSON answer, or an ApiError (LIKEN_API_*) naming `op`. */
  async request<T>(method: string, p: string, o: RequestOptions): Promise<T> {
    const body = o.body === undefined ? undefined : JSON.stringify(o.body);
    let text: string;
    let status: number;
    try {
      const res = await this.send(method, this.url(p, o.query), body, REQUEST_TIMEOUT_MS);
      status = res.statusCode ?? 0;
      this.answered(status);
      text = await readAll(res);
    } catch (e) {
      throw toApiError(e, o.op);
    }
    if (status < 200 || status >= 300) throw toApiError({ code: status, body: text }, o.op);
    return JSON.parse(text) as T;
  }

  /**
   * A watch: `onEvent` for each event line, `onDone` once when the stream ends (null: closed
   * normally; otherwise what failed, with `statusCode` for an HTTP refusal). abort() ends it
   * without calling onDone.
   */
  watch(
    p: string,
    query: RequestOptions["query"],
    onEvent: (phase: WatchPhase, object: unknown) => void,
    onDone: (err: unknown) => void,
  ): { abort(): void } {
    let aborted = false;
    let done = false;
    const finish = (err: unknown): void => {
      if (done || aborted) return;
      done = true;
      onDone(err);
    };
    let res: http.IncomingMessage | undefined;
    this.send("GET", this.url(p, { ...query, watch: true }), undefined, undefined).then(
      async (r) => {
        res = r;
        this.answered(r.statusCode ?? 0);
        if (aborted) return void r.destroy();
        if (r.statusCode !== 200) {
          const body = await readAll(r).catch(() => "");
          return finish({ statusCode: r.statusCode, body });
        }
        let pending = "";
        r.setEncoding("utf8");
        r.on("data", (chunk: string) => {
          pending += chunk;
          let nl: number;
          while ((nl = pending.indexOf("\n")) >= 0) {
            const line = pending.slice(0, nl).trim();
            pending = pending.slice(nl + 1);
            if (line === "" || aborted) continue;
            try {
              const ev = JSON.parse(line) as { type: WatchPhase; object: unknown };
              onEvent(ev.type, ev.object);
            } catch (e) {
              r.destroy(e as Error);
            }
          }
        });
        let ended = false;
        r.once("end", () => (ended = true));
        r.once("error", finish);
        // A stream the server closed ends with "end"; one cut in the middle only closes.
        r.once("close", () => finish(ended ? null : new Error("the watch connection was cut")));
      },
      finish,
    );
    return {
      abort: () => {
        aborted = true;
        res?.destroy();
      },
    };
  }
}

function readAll(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on("data", (c: Buffer) => chunks.push(c));
    res.once("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    res.once("error", reject);
  });
}
