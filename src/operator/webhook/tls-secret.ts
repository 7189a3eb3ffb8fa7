// The TLS material every copy of cluster-operator serves with, kept in one Secret in
// liken-system so that all copies (and the caBundle) agree. The first copy to start creates
// it; a copy that loses the race to create (409) reads the winner's. No person ever makes or
// copies a certificate. Rotation: delete the Secret and restart the operator (docs/operator.md).
import { ApiException, CoreV1Api, type KubeConfig, type V1Secret } from "@kubernetes/client-node";
import { issueTlsMaterial, uncoveredHosts, type TlsMaterial } from "./certs.js";
import { WebhookError } from "./errors.js";
import { TLS_SECRET, WEBHOOK_NAMESPACE } from "./names.js";

const b64 = (s: string): string => Buffer.from(s, "utf8").toString("base64");
const unb64 = (s: string | undefined): string => Buffer.from(s ?? "", "base64").toString("utf8");

function fromSecret(s: V1Secret): TlsMaterial | undefined {
  const d = s.data ?? {};
  const m = {
    caCert: unb64(d["ca.crt"]),
    caKey: unb64(d["ca.key"]),
    cert: unb64(d["tls.crt"]),
    key: unb64(d["tls.key"]),
  };
  return m.caCert && m.cert && m.key ? m : undefined;
}

function toSecret(m: TlsMaterial): V1Secret {
  return {
    metadata: {
      name: TLS_SECRET,
      namespace: WEBHOOK_NAMESPACE,
      labels: {
        "app.kubernetes.io/name": "cluster-operator",
        "app.kubernetes.io/part-of": "liken",
      },
    },
    type: "kubernetes.io/tls",
    data: {
      "tls.crt": b64(m.cert),
      "tls.key": b64(m.key),
      "ca.crt": b64(m.caCert),
      "ca.key": b64(m.caKey),
    },
  };
}

function failure(what: string, e: unknown): WebhookError {
  const detail =
    e instanceof ApiException ? `${e.code}: ${String(e.body).slice(0, 300)}` : String(e);
  return new WebhookError(
    "LIKEN_WEBHOOK_TLS",
    `could not ${what} Secret ${WEBHOOK_NAMESPACE}/${TLS_SECRET}: ${detail}`,
    { retryable: true, cause: e },
  );
}

async function read(core: CoreV1Api): Promise<V1Secret | undefined> {
  try {
    return await core.readNamespacedSecret({ name: TLS_SECRET, namespace: WEBHOOK_NAMESPACE });
  } catch (e) {
    if (e instanceof ApiException && e.code === 404) return undefined;
    throw failure("read", e);
  }
}

/**
 * The shared TLS material: read, or made and created when absent. `hosts` are the names the
 * serving certificate must carry; one that an existing certificate lacks is a usage error
 * that says how to get a new certificate.
 */
export async function ensureTlsMaterial(kc: KubeConfig, hosts: string[]): Promise<TlsMaterial> {
  const core = kc.makeApiClient(CoreV1Api);
  let secret = await read(core);
  if (secret === undefined) {
    try {
      // A create is conditional by nature: of two copies, exactly one succeeds.
      secret = await core.createNamespacedSecret({
        namespace: WEBHOOK_NAMESPACE,
        body: toSecret(await issueTlsMaterial(hosts)),
      });
    } catch (e) {
      if (!(e instanceof ApiException && e.code === 409)) throw failure("create", e);
      secret = await read(core); // another copy created it first: use theirs
      if (secret === undefined) throw failure("read back", e);
    }
  }
  const material = fromSecret(secret);
  if (material === undefined) {
    throw new WebhookError(
      "LIKEN_WEBHOOK_TLS",
      `Secret ${WEBHOOK_NAMESPACE}/${TLS_SECRET} lacks tls.crt, tls.key or ca.crt; delete it and cluster-operator makes a new one`,
    );
  }
  const missing = uncoveredHosts(material.cert, hosts);
  if (missing.length > 0) {
    throw new WebhookError(
      "LIKEN_WEBHOOK_USAGE",
      `the serving certificate in Secret ${WEBHOOK_NAMESPACE}/${TLS_SECRET} does not name ${missing.join(", ")} (the host of --webhook-url); delete the Secret and cluster-operator issues one that does`,
    );
  }
  return material;
}
