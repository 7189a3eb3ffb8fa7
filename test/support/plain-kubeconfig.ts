// A KubeConfig for a plain HTTP server on loopback that stands for an API server in a unit test
// (client-node refuses http: unless skipTLSVerify is set); a token, as an agent would send.
import { KubeConfig } from "@kubernetes/client-node";

export function plainKubeConfig(url: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "c", server: url, skipTLSVerify: true }],
    users: [{ name: "u", token: "t" }],
    contexts: [{ name: "x", cluster: "c", user: "u" }],
    currentContext: "x",
  });
  return kc;
}
