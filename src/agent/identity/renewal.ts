// When the agent renews its client certificate, and what the Machine says about it: pure
// functions of the certificate's times and the clock (table tests:
// test/unit/agent-identity.test.ts).
import type { MachineCondition } from "../../api/types.js";

/**
 * A renewal starts after this fraction of the certificate's lifetime, drawn anew for every
 * certificate: the kubelet's own window (k8s.io/client-go/util/certificate, nextRotationDeadline:
 * 70 % plus up to 20 % of jitter), so a fleet that joined in one hour does not renew in one
 * minute, and a failed renewal still has a tenth of the lifetime or more to be tried again.
 */
export const RENEW_FROM = 0.7;
export const RENEW_JITTER = 0.2;

/**
 * The condition IdentityCurrent turns False (ExpiresSoon) this close to notAfter: 30 days, or
 * a tenth of the lifetime when that is shorter. A renewal starts by 90 %, so a certificate in
 * its last tenth means renewals failed; on a one-year certificate that leaves a month to act.
 */
export const WARN_BEFORE_MS = 30 * 24 * 3600 * 1000;
export const WARN_FRACTION = 0.1;

/** The certificate's times. issuedMs: when this machine received it (the file's time). */
export interface CertTimes {
  notBeforeMs: number;
  notAfterMs: number;
  /**
   * When the machine wrote the certificate. The kube-apiserver-client signer backdates
   * notBefore by 5 minutes (k8s.io/kubernetes pkg/controller/certificates/signer, Backdate),
   * so a certificate of minutes would look mostly spent the moment it arrives; the lifetime
   * counts from the later of the two.
   */
  issuedMs: number;
}

function start(c: CertTimes): number {
  return Math.min(Math.max(c.notBeforeMs, c.issuedMs), c.notAfterMs);
}

/** When to start renewing: start + (70 % + jitter × 20 %) of the lifetime; jitter in [0, 1). */
export function renewAtMs(c: CertTimes, jitter: number): number {
  const from = start(c);
  const fraction = RENEW_FROM + RENEW_JITTER * Math.min(Math.max(jitter, 0), 1);
  return from + Math.round((c.notAfterMs - from) * fraction);
}

/** How the machine came by its certificate (the condition's reason when it is current). */
export type IdentitySource = "Joined" | "Renewed" | "Rejoined" | "Provided";

/** IdentityCurrent for the Machine: False ExpiresSoon in the last stretch, else the source. */
export function identityCondition(
  c: CertTimes,
  source: IdentitySource,
  nowMs: number,
): Omit<MachineCondition, "lastTransitionTime"> {
  const until = new Date(c.notAfterMs).toISOString();
  const warnMs = Math.min(WARN_BEFORE_MS, (c.notAfterMs - start(c)) * WARN_FRACTION);
  if (c.notAfterMs - nowMs <= warnMs) {
    return {
      type: "IdentityCurrent",
      status: "False",
      reason: "ExpiresSoon",
      message: `the client certificate expires at ${until} and no renewal succeeded; see the agent's log and the machine's CertificateSigningRequests (docs/machine.md, "Identity")`,
    };
  }
  const how: Record<IdentitySource, string> = {
    Joined: "issued when the machine joined with the bootstrap credential",
    Renewed: "renewed with the machine's own identity",
    Rejoined:
      "issued after the previous one had expired: the machine joined again with the bootstrap credential",
    Provided: "provided with the machine (not renewed by liken)",
  };
  return {
    type: "IdentityCurrent",
    status: "True",
    reason: source,
    message: `client certificate valid until ${until}, ${how[source]}`,
  };
}
