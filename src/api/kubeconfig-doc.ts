// One kubeconfig writer for every identity liken hands out or holds: the local control plane's
// admin token, an agent's client certificate (the lab's, and the one a machine's CSR earned),
// the operator's ServiceAccount token.
import { stringify } from "yaml";

export type Credentials = { token: string } | { certFile: string; keyFile: string };

export function kubeconfigYaml(o: {
  server: string;
  user: string;
  credentials: Credentials;
  /** The cluster's (and the context's) name; "liken-local" for the local control plane. */
  cluster?: string;
  /** The name the server's certificate carries when `server` is an address it does not. */
  tlsServerName?: string;
  /** The server's CA: a file beside the kubeconfig, or inline (base64 PEM); neither: the
   * system's. */
  caFile?: string;
  caData?: string;
}): string {
  const name = o.cluster ?? "liken-local";
  const user =
    "token" in o.credentials
      ? { token: o.credentials.token }
      : { "client-certificate": o.credentials.certFile, "client-key": o.credentials.keyFile };
  return stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name,
        cluster: {
          server: o.server,
          ...(o.caFile === undefined ? {} : { "certificate-authority": o.caFile }),
          ...(o.caData === undefined ? {} : { "certificate-authority-data": o.caData }),
          ...(o.tlsServerName === undefined ? {} : { "tls-server-name": o.tlsServerName }),
        },
      },
    ],
    users: [{ name: o.user, user }],
    contexts: [{ name, context: { cluster: name, user: o.user } }],
    "current-context": name,
  });
}
