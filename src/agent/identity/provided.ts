// What the Machine says of a client certificate liken did not issue (a kubeconfig made by hand):
// its expiry and IdentityCurrent with the source Provided, read off the certificate itself.
import { X509Certificate } from "node:crypto";
import type { MachineCondition } from "../../api/types.js";
import { rfc3339 } from "../../api/time.js";
import { identityCondition } from "./renewal.js";

/** The Machine's view of a certificate liken did not issue (a kubeconfig made by hand). */
export function providedStatus(
  cert: Buffer | undefined,
  nowMs: number,
):
  | { certificateExpiry: string; condition: Omit<MachineCondition, "lastTransitionTime"> }
  | undefined {
  if (cert === undefined) return undefined;
  try {
    const x = new X509Certificate(cert);
    const times = {
      notBeforeMs: Date.parse(x.validFrom),
      notAfterMs: Date.parse(x.validTo),
      issuedMs: Date.parse(x.validFrom),
    };
    return {
      certificateExpiry: rfc3339(new Date(times.notAfterMs)),
      condition: identityCondition(times, "Provided", nowMs),
    };
  } catch {
    return undefined;
  }
}
