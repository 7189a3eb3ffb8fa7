// Machine identities on the test control plane: the fleet's bootstrap token, kubeconfigs for
// it, certificate requests of any shape (openssl makes the odd keys liken's agent never
// would), and what the approver said about a request; and the identity tests' set-ups: the
// approver as cluster-operator runs it, a machine's agent identity with a log the test reads,
// identity files installed as an agent keeps them, and the wait for a machine accepted again.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import { CoreV1Api } from "@kubernetes/client-node";
import { pino, type Logger } from "pino";
import { installIssued, writeKubeconfig } from "../../src/agent/identity/files.js";
import { MachineIdentity } from "../../src/agent/identity/identity.js";
import { bootstrapTokenSecret, newBootstrapToken } from "../../src/api/bootstrap-token.js";
import { loadRestConfig, Rest } from "../../src/api/rest.js";
import { kubeconfigYaml } from "../../src/api/kubeconfig-doc.js";
import { authenticatedUser } from "../../src/api/self-review.js";
import { CsrApprover } from "../../src/operator/identity/approver.js";
import {
  controlPlane,
  eventsWhere,
  kubeConfig,
  kubectl,
  serviceAccountKubeConfig,
  waitFor,
} from "./kube.js";
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

/**
 * cluster-operator's certificate approver as the operator runs it, started: as the operator's
 * ServiceAccount (so its RBAC is what approves), approving by itself, leading, looking every
 * 500 ms, its log at warn. `nodeLabel` (--csr-node-label, `key=value`) marks the fleet's Nodes;
 * without it only a Machine created ahead may join. The caller stops it.
 */
export async function startApprover(identity: string, nodeLabel?: string): Promise<CsrApprover> {
  const approver = new CsrApprover(
    await serviceAccountKubeConfig("liken-system", "cluster-operator"),
    {
      autoApprove: true,
      ...(nodeLabel === undefined ? {} : { nodeLabel }),
      leading: () => true,
      identity,
      log: pino({ level: "warn" }),
      intervalMs: 500,
    },
  );
  approver.start();
  return approver;
}

/** A logger at info whose lines (pino's JSON, one a line) the test reads in `lines`. */
export function capturedLog(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  const log = pino(
    { level: "info" },
    new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(chunk.toString());
        done();
      },
    }),
  );
  return { log, lines };
}

/**
 * The agent's identity of `machine` (liken agent's MachineIdentity), its files beside
 * `kubeconfig`: it joins with the fleet's `bootstrap` kubeconfig, asks for certificates of an
 * hour, and says so after a minute unapproved.
 */
export function machineIdentity(
  machine: string,
  kubeconfig: string,
  bootstrap: string,
  log: Logger,
): MachineIdentity {
  return new MachineIdentity(
    machine,
    {
      kubeconfig,
      bootstrapKubeconfig: bootstrap,
      expirationSeconds: 3600,
      approvalWarnMs: 60_000,
    },
    log,
  );
}

/**
 * A machine's identity files in `dir` as its agent keeps them: `cert` installed as the current
 * certificate, and the kubeconfig (its path returned) that uses it as `user` on the control
 * plane.
 */
export function installedIdentity(
  dir: string,
  user: string,
  cert: { certPem: string; keyPem: string },
): string {
  const kubeconfig = path.join(dir, "kubeconfig");
  installIssued(dir, cert.certPem, cert.keyPem, Date.now());
  const cp = controlPlane();
  writeKubeconfig(kubeconfig, {
    server: cp.server,
    caData: readFileSync(cp.serverCaCert).toString("base64"),
    user,
  });
  return kubeconfig;
}

/**
 * The agent's own requests go on through `rest` (a heartbeat a second, each refused until it
 * rejoined) until the API server takes them for `user` and `changed()` says the identity
 * changed: two minutes at most.
 */
export async function untilAcceptedAs(
  rest: Rest,
  user: string,
  changed: () => boolean,
): Promise<void> {
  let who: string | undefined;
  const beat = setInterval(() => {
    authenticatedUser(rest).then(
      (u) => (who = u),
      () => undefined,
    );
  }, 1000);
  try {
    await waitFor(
      "the machine back with a certificate the API server accepts",
      async () => changed() && who === user,
      { timeoutMs: 120_000, intervalMs: 500 },
    );
  } finally {
    clearInterval(beat);
  }
}
