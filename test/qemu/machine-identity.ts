// The machine's identity as a fleet gets it (docs/machine.md, "Identity"): the scenario makes
// the fleet's bootstrap token (a bootstrap-token Secret in kube-system) and hands the machine a
// kubeconfig carrying that token alone. The agent makes its key on the machine, files its
// certificate request, and cluster-operator's approver approves it; no certificate is made on
// the host. The kubeconfig carries everything inline (the guest has none of the host's files)
// and names the API server by the guest's fixed address.
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { stringify } from "yaml";
import { bootstrapTokenSecret, newBootstrapToken } from "../../src/api/bootstrap-token.js";

/**
 * A name in the serving certificate (src/controlplane/certs.ts) that TLS checks instead of
 * the address the guest dials: the guest reaches the API server at GUEST_API, an address the
 * control plane's certificate does not name, and no test control plane should carry it.
 */
export const API_TLS_SERVER_NAME = "kubernetes";

/** The fleet's shared credential: what the machine image carries, and nothing else. */
export interface BootstrapIdentity {
  token: string;
}

/** A bootstrap token for the scenario's fleet, valid for a day. */
export async function makeBootstrapToken(kc: KubeConfig): Promise<BootstrapIdentity> {
  const token = newBootstrapToken();
  const expires = new Date(Date.now() + 24 * 3600 * 1000);
  await kc.makeApiClient(CoreV1Api).createNamespacedSecret({
    namespace: "kube-system",
    body: bootstrapTokenSecret(token, { expires, description: "the machine scenario's fleet" }),
  });
  return { token };
}

/** A self-contained bootstrap kubeconfig: server, CA and the token inline. */
export function machineKubeconfig(o: {
  server: string;
  caPem: string;
  identity: BootstrapIdentity;
}): string {
  const b64 = (s: string): string => Buffer.from(s).toString("base64");
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "liken",
        cluster: {
          server: o.server,
          "certificate-authority-data": b64(o.caPem),
          "tls-server-name": API_TLS_SERVER_NAME,
        },
      },
    ],
    users: [{ name: "bootstrap", user: { token: o.identity.token } }],
    contexts: [{ name: "liken", context: { cluster: "liken", user: "bootstrap" } }],
    "current-context": "liken",
  });
}
