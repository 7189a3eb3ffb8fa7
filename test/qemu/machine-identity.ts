// The machine's own identity, issued as docs/machine.md ("The agent's identity") tells a
// person: a key and a certificate request made on the spot (openssl), a CertificateSigningRequest
// for the kube-apiserver-client signer, approved, and the signed certificate read back. The
// kubeconfig carries everything inline (the guest has none of the host's files) and names the
// API server by the guest's fixed address.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import { CertificatesV1Api, type KubeConfig } from "@kubernetes/client-node";
import { stringify } from "yaml";
import { agentUserName, AGENT_GROUP } from "../../src/api/types.js";

const run = promisify(execFile);

/** The kube-controller-manager signs approved requests within a second or two. */
const SIGN_TIMEOUT_MS = 60_000;

/**
 * A name in the serving certificate (src/controlplane/certs.ts) that TLS checks instead of
 * the address the guest dials: the guest reaches the API server at GUEST_API, an address the
 * control plane's certificate does not name, and no test control plane should carry it.
 */
export const API_TLS_SERVER_NAME = "kubernetes";

export interface IssuedIdentity {
  certPem: string;
  keyPem: string;
}

export async function issueMachineCert(
  kc: KubeConfig,
  dir: string,
  machine: string,
): Promise<IssuedIdentity> {
  const keyFile = path.join(dir, `${machine}.key`);
  const csrFile = path.join(dir, `${machine}.csr`);
  await run("openssl", [
    "req",
    "-new",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-keyout",
    keyFile,
    "-subj",
    `/O=${AGENT_GROUP}/CN=${agentUserName(machine)}`,
    "-out",
    csrFile,
  ]);
  const certs = kc.makeApiClient(CertificatesV1Api);
  const name = `liken-machine-${machine}`;
  await certs.createCertificateSigningRequest({
    body: {
      metadata: { name },
      spec: {
        request: readFileSync(csrFile).toString("base64"),
        signerName: "kubernetes.io/kube-apiserver-client",
        usages: ["client auth"],
      },
    },
  });
  // `kubectl certificate approve`: an Approved condition on the approval subresource.
  const csr = await certs.readCertificateSigningRequest({ name });
  csr.status = {
    ...csr.status,
    conditions: [
      ...(csr.status?.conditions ?? []),
      {
        type: "Approved",
        status: "True",
        reason: "LikenMachineScenario",
        message: `the machine scenario approves ${machine}'s own identity`,
      },
    ],
  };
  await certs.replaceCertificateSigningRequestApproval({ name, body: csr });
  const deadline = Date.now() + SIGN_TIMEOUT_MS;
  for (;;) {
    const cur = await certs.readCertificateSigningRequest({ name });
    if (cur.status?.certificate) {
      return {
        certPem: Buffer.from(cur.status.certificate, "base64").toString(),
        keyPem: readFileSync(keyFile, "utf8"),
      };
    }
    if (Date.now() > deadline) {
      throw new Error(
        `CertificateSigningRequest ${name} was approved but not signed within ${SIGN_TIMEOUT_MS / 1000} s; is kube-controller-manager running with --cluster-signing-cert-file?`,
      );
    }
    await sleep(250);
  }
}

/** A self-contained kubeconfig: server, CA, certificate and key inline. */
export function machineKubeconfig(o: {
  server: string;
  caPem: string;
  identity: IssuedIdentity;
  machine: string;
}): string {
  const b64 = (s: string): string => Buffer.from(s).toString("base64");
  const user = agentUserName(o.machine);
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
    users: [
      {
        name: user,
        user: {
          "client-certificate-data": b64(o.identity.certPem),
          "client-key-data": b64(o.identity.keyPem),
        },
      },
    ],
    contexts: [{ name: "liken", context: { cluster: "liken", user } }],
    "current-context": "liken",
  });
}
