// The HTTPS endpoint the API server calls for each eviction a machine's agent asks for: it
// reads the facts (the pod, the caller's Machine, its Cluster) fresh from the API server,
// asks reviewEviction, and answers with an AdmissionReview. Facts are read, never cached:
// a turn granted a moment ago must count, and one taken back must stop counting.
import { createServer, type Server } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import { ApiException, CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { LikenApi } from "../../api/index.js";
import type { Logger } from "../logger.js";
import type { TlsMaterial } from "./certs.js";
import { EVICTION_PATH } from "./names.js";
import { machineOf, reviewEviction, type EvictionFacts, type Verdict } from "./review.js";

/** The fields of admission.k8s.io/v1 AdmissionReview's request that the check reads. */
interface AdmissionRequest {
  uid: string;
  name?: string;
  namespace?: string;
  resource?: { resource?: string };
  subResource?: string;
  userInfo?: { username?: string; groups?: string[] };
}

interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: { code: number; reason: string; message: string };
}

/** An AdmissionReview is a few KiB; anything far larger is not one. */
const MAX_BODY_BYTES = 1 << 20;

const REASONS: Record<number, string> = {
  403: "Forbidden",
  404: "NotFound",
  400: "BadRequest",
  503: "ServiceUnavailable",
};

function deny(uid: string, code: number, message: string): AdmissionResponse {
  return { uid, allowed: false, status: { code, reason: REASONS[code] ?? "Forbidden", message } };
}

/** Reads what the check needs; an unreadable fact is an error (never a guess). */
export class FactReader {
  private readonly core: CoreV1Api;
  private readonly api: LikenApi;

  constructor(kc: KubeConfig) {
    this.core = kc.makeApiClient(CoreV1Api);
    this.api = new LikenApi(kc, "cluster-operator");
  }

  async read(username: string, namespace: string, name: string): Promise<EvictionFacts> {
    const pod = `${namespace}/${name}`;
    const machineName = machineOf(username);
    const [podNode, machine] = await Promise.all([
      this.podNode(namespace, name),
      machineName === undefined ? undefined : this.api.machines.find(machineName),
    ]);
    const cluster =
      machine === undefined ? undefined : await this.api.clusters.find(machine.spec.cluster);
    return { username, pod, podNode, machine, cluster };
  }

  private async podNode(namespace: string, name: string): Promise<string | undefined> {
    try {
      const p = await this.core.readNamespacedPod({ namespace, name });
      return p.spec?.nodeName ?? "";
    } catch (e) {
      if (e instanceof ApiException && e.code === 404) return undefined;
      throw e;
    }
  }
}

function errorText(e: unknown): string {
  if (e instanceof ApiException) return `HTTP ${e.code}`;
  return e instanceof Error ? e.message : String(e);
}

export async function answer(
  request: AdmissionRequest,
  facts: FactReader,
  log: Logger,
): Promise<AdmissionResponse> {
  const { uid, namespace = "", name = "" } = request;
  const username = request.userInfo?.username ?? "";
  const what = `${request.resource?.resource}/${request.subResource ?? ""}`;
  if (what !== "pods/eviction") {
    return deny(uid, 400, `this webhook checks pods/eviction only, not ${what}`);
  }
  const pod = `${namespace}/${name}`;
  let verdict: Verdict;
  try {
    verdict = reviewEviction(await facts.read(username, namespace, name));
  } catch (e) {
    const message = `cluster-operator could not check ${username}'s eviction of pod ${pod}: reading the pod, the Machine or the Cluster failed (${errorText(e)}); the drain tries again`;
    log.warn({ user: username, pod }, message);
    return deny(uid, 503, message);
  }
  if (verdict.allowed) {
    log.info({ user: username, pod }, verdict.message);
    return { uid, allowed: true };
  }
  log.warn({ user: username, pod, reason: verdict.reason }, `refused: ${verdict.message}`);
  return deny(uid, verdict.code, verdict.message);
}

async function body(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new Error(`request body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function send(res: ServerResponse, status: number, obj: unknown): void {
  const text = JSON.stringify(obj);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
  });
  res.end(text);
}

export function createWebhookServer(tls: TlsMaterial, facts: FactReader, log: Logger): Server {
  return createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    if (req.method === "GET" && req.url === "/healthz") return send(res, 200, { ok: true });
    if (req.method !== "POST" || req.url?.split("?")[0] !== EVICTION_PATH) {
      return send(res, 404, { error: `POST ${EVICTION_PATH} only` });
    }
    body(req)
      .then(async (text) => {
        const review = JSON.parse(text) as { apiVersion?: string; request?: AdmissionRequest };
        if (review.request?.uid === undefined) throw new Error("not an AdmissionReview request");
        const response = await answer(review.request, facts, log);
        send(res, 200, { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview", response });
      })
      .catch((e: unknown) => {
        // The API server then applies failurePolicy: Fail, and the eviction is refused.
        send(res, 400, { error: e instanceof Error ? e.message : String(e) });
      });
  });
}
