// One kubeconfig writer for every identity the local control plane hands out: the admin
// token, an agent's client certificate, the operator's ServiceAccount token.
import { stringify } from "yaml";

export type Credentials = { token: string } | { certFile: string; keyFile: string };

export function kubeconfigYaml(o: {
  server: string;
  caFile: string;
  user: string;
  credentials: Credentials;
}): string {
  const user =
    "token" in o.credentials
      ? { token: o.credentials.token }
      : { "client-certificate": o.credentials.certFile, "client-key": o.credentials.keyFile };
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      { name: "liken-local", cluster: { server: o.server, "certificate-authority": o.caFile } },
    ],
    users: [{ name: o.user, user }],
    contexts: [{ name: "liken-local", context: { cluster: "liken-local", user: o.user } }],
    "current-context": "liken-local",
  });
}
