// Machine identities on the test control plane: the fleet's bootstrap token, kubeconfigs for
// it, certificate requests of any shape (openssl makes the odd keys liken's agent never
// would), and what the approver said about a request.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { CoreV1Api } from "@kubernetes/client-node";
import { bootstrapTokenSecret, newBootstrapToken } from "../../src/api/bootstrap-token.js";
import { loadRestConfig, Rest } from "../../src/api/rest.js";
import { kubeconfigYaml } from "../../src/api/kubeconfig-doc.js";
import { controlPlane, eventsWhere, kubeConfig, kubectl } from "./kube.js";
import { untrustedCertificate as signedByUntrustedCa } from "../../src/torture/ca-rotation.js";

const CONFIG = fileURLToPath(new URL("../../config/", import.meta.url));
export const CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

/** RBAC for the bootstrap group, the agents and cluster-operator, as the install applies it. */
export async function installIdentityRbac(): Promise<void> {
  for (const f of ["namespaces", "bootstrap", "agent", "cluster-operator"]) {
    const r = await kubectl(["apply", "-f", path.join(CONFIG, "rbac", `${f}.yaml`)]);
    if (r.code !== 0) throw new Error(`kubectl apply ${f}.yaml: ${r.stderr}`);
  }
}

/** A new bootstrap token, valid for an hour, and a kubeconfig file that carries it. */
export async function bootstrapToken(): Promise<{ token: string; kubeconfig: string }> {
  const token = newBootstrapToken();
  const expires = new Date(Date.now() + 3600_000);
  await kubeConfig()
    .makeApiClient(CoreV1Api)
    .createNamespacedSecret({
      namespace: "kube-system",
      body: bootstrapTokenSecret(token, { expires }),
    });
  const cp = controlPlane();
  const dir = mkdtempSync(path.join(cp.dataDir, "bootstrap-"));
  const kubeconfig = path.join(dir, "bootstrap.kubeconfig");
  writeFileSync(
    kubeconfig,
    kubeconfigYaml({
      server: cp.server,
      caFile: cp.serverCaCert,
      user: "bootstrap",
      credentials: { token },
    }),
    { mode: 0o600 },
  );
  return { token, kubeconfig };
}

export interface RawRequest {
  name: string;
  subject: string;
  /** openssl -newkey argument: "ec:P-256", "rsa:1024", "ec:P-224". */
  key?: string;
  signerName?: string;
  usages?: string[];
  /** subjectAltName value, e.g. "DNS:x". */
  san?: string;
}

function keyArgs(spec: string): string[] {
  const [kind, param] = spec.split(":");
  if (kind === "rsa") return ["-newkey", `rsa:${param}`];
  return ["-newkey", "ec", "-pkeyopt", `ec_paramgen_curve:${param}`];
}

/** Files a request of this shape as the identity of `kubeconfig`; returns its name. */
export async function fileRaw(kubeconfig: string, r: RawRequest): Promise<string> {
  const cp = controlPlane();
  const dir = path.join(cp.dataDir, "csr");
  mkdirSync(dir, { recursive: true });
  const sub = mkdtempSync(path.join(dir, "r-"));
  const out = path.join(sub, "req.pem");
  execFileSync(
    "openssl",
    [
      "req",
      "-new",
      ...keyArgs(r.key ?? "ec:P-256"),
      "-nodes",
      "-keyout",
      path.join(sub, "key.pem"),
      "-subj",
      r.subject,
      ...(r.san === undefined ? [] : ["-addext", `subjectAltName=${r.san}`]),
      "-out",
      out,
    ],
    { stdio: "pipe" },
  );
  const rest = new Rest(loadRestConfig(kubeconfig), "liken-test");
  await rest.request("POST", CSR_PATH, {
    op: { verb: "create", kind: "CertificateSigningRequest", name: r.name },
    body: {
      apiVersion: "certificates.k8s.io/v1",
      kind: "CertificateSigningRequest",
      metadata: { name: r.name },
      spec: {
        request: readFileSync(out).toString("base64"),
        signerName: r.signerName ?? "kubernetes.io/kube-apiserver-client",
        usages: r.usages ?? ["client auth"],
      },
    },
  });
  return r.name;
}

export interface CsrState {
  conditions: { type: string; reason?: string; message?: string }[];
  certificate?: string;
}

/** The request as the admin reads it. */
export async function readCsr(name: string): Promise<CsrState> {
  const rest = new Rest(loadRestConfig(controlPlane().kubeconfig), "liken-test");
  const csr = await rest.request<{ status?: Partial<CsrState> }>("GET", `${CSR_PATH}/${name}`, {
    op: { verb: "get", kind: "CertificateSigningRequest", name },
  });
  return { conditions: csr.status?.conditions ?? [], certificate: csr.status?.certificate };
}

/** The reasons of the Events about one request. */
export async function csrEventReasons(name: string): Promise<string[]> {
  const events = await eventsWhere(
    `involvedObject.name=${name},involvedObject.kind=CertificateSigningRequest`,
  );
  return events.map((e) => e.reason);
}

/** A certificate for `user`, valid for a day, signed by a CA made here (no API server trusts it). */
export function untrustedCertificate(
  dir: string,
  user: string,
): { certPem: string; keyPem: string } {
  return signedByUntrustedCa(dir, `/CN=${user}`);
}
