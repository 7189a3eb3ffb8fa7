// The names the webhook's parts share with config/webhook/ and config/rbac/cluster-operator.yaml
// (RBAC names the Secret and the configuration by resourceNames, so these never change).
import { OPERATOR_NAMESPACE } from "../../api/index.js";

/** The ValidatingWebhookConfiguration whose caBundle (and, in URL mode, URL) the operator keeps. */
export const WEBHOOK_CONFIGURATION = "liken-eviction-restriction";
/** The webhook's name inside it (the API server names it in its errors). */
export const WEBHOOK_NAME = "eviction.liken.sh";
/** The Secret in liken-system that holds the CA and serving certificate all copies share. */
export const TLS_SECRET = "cluster-operator-webhook-tls";
/** The Service in front of the operator's copies (the in-cluster way to reach them). */
export const WEBHOOK_SERVICE = "cluster-operator-webhook";
export const WEBHOOK_NAMESPACE = OPERATOR_NAMESPACE;
export const EVICTION_PATH = "/validate-eviction";
/** The Deployment's container port, which the Service targets. */
export const DEFAULT_WEBHOOK_PORT = 9443;

/** What the serving certificate names: the Service's DNS names and loopback. */
export function servingHosts(extra: string[] = []): string[] {
  const svc = `${WEBHOOK_SERVICE}.${WEBHOOK_NAMESPACE}`;
  const base = [`${svc}.svc`, `${svc}.svc.cluster.local`, svc, "localhost", "127.0.0.1", "::1"];
  return [...base, ...extra.filter((h) => !base.includes(h))];
}
