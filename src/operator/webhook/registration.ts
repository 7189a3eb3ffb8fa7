// Keeps the ValidatingWebhookConfiguration that config/webhook/ installs pointed at this
// operator: its caBundle is the CA of the shared Secret, and in URL mode its clientConfig is
// the URL instead of the Service. Only the webhook's own entry is touched; RBAC lets the
// operator get and update this one configuration (resourceNames) and no other.
import {
  AdmissionregistrationV1Api,
  ApiException,
  type KubeConfig,
  type V1ValidatingWebhookConfiguration,
  type AdmissionregistrationV1WebhookClientConfig,
} from "@kubernetes/client-node";
import { WebhookError } from "./errors.js";
import {
  EVICTION_PATH,
  WEBHOOK_CONFIGURATION,
  WEBHOOK_NAME,
  WEBHOOK_NAMESPACE,
  WEBHOOK_SERVICE,
} from "./names.js";

/** The clientConfig the webhook entry should have: by URL, or by the Service (the default). */
export function desiredClientConfig(
  caCertPem: string,
  url: string | undefined,
): AdmissionregistrationV1WebhookClientConfig {
  const caBundle = Buffer.from(caCertPem, "utf8").toString("base64");
  if (url !== undefined) return { url, caBundle };
  return {
    service: {
      name: WEBHOOK_SERVICE,
      namespace: WEBHOOK_NAMESPACE,
      path: EVICTION_PATH,
      port: 443,
    },
    caBundle,
  };
}

function sameConfig(
  a: AdmissionregistrationV1WebhookClientConfig | undefined,
  b: AdmissionregistrationV1WebhookClientConfig,
): boolean {
  const norm = (c: AdmissionregistrationV1WebhookClientConfig | undefined) =>
    JSON.stringify({
      url: c?.url,
      caBundle: c?.caBundle,
      service: c?.service && { ...c.service, port: c.service.port ?? 443 },
    });
  return norm(a) === norm(b);
}

export type RegistrationResult = "updated" | "unchanged";

const ATTEMPTS = 5;

/** Writes the caBundle (and the URL) into the webhook entry when they differ. */
export async function ensureRegistration(
  kc: KubeConfig,
  caCertPem: string,
  url: string | undefined,
): Promise<RegistrationResult> {
  const api = kc.makeApiClient(AdmissionregistrationV1Api);
  const want = desiredClientConfig(caCertPem, url);
  for (let attempt = 1; ; attempt++) {
    let vwc: V1ValidatingWebhookConfiguration;
    try {
      vwc = await api.readValidatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION });
    } catch (e) {
      if (e instanceof ApiException && e.code === 404) {
        throw new WebhookError(
          "LIKEN_WEBHOOK_REGISTRATION",
          `ValidatingWebhookConfiguration ${WEBHOOK_CONFIGURATION} is not installed, so no agent's eviction is checked against its node and reboot turn; install it with \`kubectl apply -k config/\``,
          { retryable: true, cause: e },
        );
      }
      throw failure("read", e);
    }
    const hooks = vwc.webhooks ?? [];
    const entry = hooks.find((w) => w.name === WEBHOOK_NAME);
    if (entry === undefined) {
      throw new WebhookError(
        "LIKEN_WEBHOOK_REGISTRATION",
        `ValidatingWebhookConfiguration ${WEBHOOK_CONFIGURATION} has no webhook named ${WEBHOOK_NAME}; apply config/webhook/ again`,
        { retryable: true },
      );
    }
    // Keep a Service the installer customised (another port or path), only add the caBundle.
    const wantHere =
      url === undefined && entry.clientConfig.service !== undefined
        ? { service: entry.clientConfig.service, caBundle: want.caBundle }
        : want;
    if (sameConfig(entry.clientConfig, wantHere)) return "unchanged";
    entry.clientConfig = wantHere;
    if (url !== undefined) recordUrlAsApplied(vwc, url);
    try {
      // vwc carries its resourceVersion: a concurrent writer makes this a 409, and we re-read.
      await api.replaceValidatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATION, body: vwc });
      return "updated";
    } catch (e) {
      if (!(e instanceof ApiException && e.code === 409) || attempt >= ATTEMPTS) {
        throw failure("update", e);
      }
    }
  }
}

/** kubectl's record of what `kubectl apply` last applied to an object. */
const LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration";

/**
 * In URL mode, writes the URL into kubectl's last-applied record as well. Without it, the
 * next `kubectl apply -k config/` would add config/'s `service` beside the live `url` (its
 * three-way merge removes only what it applied itself) and the API server would refuse the
 * object: "exactly one of url or service is required". With it, that apply swaps the URL for
 * the Service cleanly, and the operator puts its URL back at its next look (within a minute).
 */
export function recordUrlAsApplied(vwc: V1ValidatingWebhookConfiguration, url: string): void {
  const text = vwc.metadata?.annotations?.[LAST_APPLIED];
  if (text === undefined) return;
  let applied: { webhooks?: { name?: string; clientConfig?: Record<string, unknown> }[] };
  try {
    applied = JSON.parse(text) as typeof applied;
  } catch {
    return; // not kubectl's record: leave it alone
  }
  const hook = applied.webhooks?.find((w) => w.name === WEBHOOK_NAME);
  if (hook === undefined) return;
  hook.clientConfig = { url };
  vwc.metadata!.annotations![LAST_APPLIED] = JSON.stringify(applied);
}

function failure(what: string, e: unknown): WebhookError {
  const detail =
    e instanceof ApiException ? `${e.code}: ${String(e.body).slice(0, 300)}` : String(e);
  return new WebhookError(
    "LIKEN_WEBHOOK_REGISTRATION",
    `could not ${what} ValidatingWebhookConfiguration ${WEBHOOK_CONFIGURATION}: ${detail}`,
    { retryable: true, cause: e },
  );
}
