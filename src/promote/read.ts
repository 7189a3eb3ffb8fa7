// Reads the evidence of one ring, one cluster per kubeconfig context, with read-only
// credentials: before anything else each context's credentials are asked (a
// SelfSubjectAccessReview, the API server's own answer) whether they may write Clusters, and a
// context that can is refused: a promotion job that holds the ring's write credentials is one
// leaked token away from rewriting the evidence it signs. Then the Cluster is read as is.
import { AuthorizationV1Api, KubeConfig } from "@kubernetes/client-node";
import { LikenApi } from "../api/client.js";
import type { Cluster } from "../api/types.js";
import { reuseConnections } from "../api/kubeconfig.js";
import { errorText } from "../errors.js";
import { PromoteError } from "./errors.js";

/** `--context NAME` or `--context NAME/CLUSTER` (when the context's API holds several Clusters). */
export interface ContextRef {
  context: string;
  cluster?: string;
}

export function parseContextRef(text: string): ContextRef {
  const slash = text.lastIndexOf("/");
  if (slash <= 0) return { context: text };
  return { context: text.slice(0, slash), cluster: text.slice(slash + 1) };
}

export interface ClusterRead {
  context: string;
  server: string;
  cluster: Cluster;
  readAt: Date;
}

/** What writing a Cluster takes; any one allowed makes the context one that can write. */
const WRITES: readonly { verb: string; subresource?: string }[] = [
  { verb: "create" },
  { verb: "update" },
  { verb: "patch" },
  { verb: "delete" },
  { verb: "update", subresource: "status" },
  { verb: "patch", subresource: "status" },
];

const READ_TIMEOUT_MS = 15_000;

async function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms / 1000} s`)), ms);
  });
  try {
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

function configFor(base: KubeConfig, ref: ContextRef): { kc: KubeConfig; server: string } {
  if (base.getContextObject(ref.context) === null) {
    const known = base.getContexts().map((c) => c.name);
    throw new PromoteError(
      "LIKEN_PROMOTE_CONTEXT_UNREACHABLE",
      `context ${ref.context} is not in the kubeconfig (it has: ${known.join(", ") || "none"}); name a context of the ring's clusters`,
      { context: { context: ref.context } },
    );
  }
  const kc = new KubeConfig();
  kc.loadFromString(base.exportConfig());
  kc.setCurrentContext(ref.context);
  return { kc: reuseConnections(kc), server: kc.getCurrentCluster()?.server ?? "?" };
}

/** The write verbs these credentials are allowed on Clusters, as the API server answers. */
async function writesAllowed(kc: KubeConfig): Promise<string[]> {
  const authz = kc.makeApiClient(AuthorizationV1Api);
  const allowed: string[] = [];
  for (const w of WRITES) {
    const r = await authz.createSelfSubjectAccessReview({
      body: {
        apiVersion: "authorization.k8s.io/v1",
        kind: "SelfSubjectAccessReview",
        spec: {
          resourceAttributes: {
            group: "liken.sh",
            resource: "clusters",
            verb: w.verb,
            ...(w.subresource === undefined ? {} : { subresource: w.subresource }),
          },
        },
      },
    });
    if (r.status?.allowed === true)
      allowed.push(w.subresource === undefined ? w.verb : `${w.verb} ${w.subresource}`);
  }
  return allowed;
}

function pickCluster(ref: ContextRef, items: readonly Cluster[], server: string): Cluster {
  const named =
    ref.cluster === undefined ? items : items.filter((c) => c.metadata.name === ref.cluster);
  if (named.length === 1) return named[0]!;
  const names = items.map((c) => c.metadata.name).join(", ") || "none";
  const message =
    named.length === 0
      ? `context ${ref.context} (${server}) holds no Cluster${ref.cluster === undefined ? "" : ` ${ref.cluster}`} (it has: ${names}); name the ring's Cluster as --context ${ref.context}/NAME`
      : `context ${ref.context} (${server}) holds ${named.length} Clusters (${names}): name the one of this ring as --context ${ref.context}/NAME`;
  throw new PromoteError("LIKEN_PROMOTE_NO_CLUSTER", message, {
    context: { context: ref.context, clusters: names },
  });
}

/** Reads one context's Cluster, refusing a context that cannot be reached or that can write. */
export async function readContext(base: KubeConfig, ref: ContextRef): Promise<ClusterRead> {
  const { kc, server } = configFor(base, ref);
  const unreachable = (e: unknown): PromoteError =>
    new PromoteError(
      "LIKEN_PROMOTE_CONTEXT_UNREACHABLE",
      `context ${ref.context} (${server}) cannot be reached: ${errorText(e)}; check the context's server and credentials, or leave the cluster out of the ring`,
      { context: { context: ref.context, server }, cause: e, retryable: true },
    );
  let allowed: string[];
  try {
    allowed = await within(READ_TIMEOUT_MS, `context ${ref.context}`, writesAllowed(kc));
  } catch (e) {
    throw unreachable(e);
  }
  if (allowed.length > 0) {
    throw new PromoteError(
      "LIKEN_PROMOTE_CONTEXT_CAN_WRITE",
      `context ${ref.context} (${server}) may write Clusters (${allowed.join(", ")} on clusters.liken.sh): liken promote reads evidence with read-only credentials only; give it a context bound to a role with get/list on clusters.liken.sh (docs/rings.md)`,
      { context: { context: ref.context, server, allowed } },
    );
  }
  let items: Cluster[];
  try {
    const api = new LikenApi(kc, "liken-promote");
    items = (await within(READ_TIMEOUT_MS, `context ${ref.context}`, api.clusters.list())).items;
  } catch (e) {
    throw unreachable(e);
  }
  return {
    context: ref.context,
    server,
    cluster: pickCluster(ref, items, server),
    readAt: new Date(),
  };
}
