// The guest kubelet's identity, issued as a person would for a node without bootstrap tokens
// (docs/machine.md, "The kubelet's identity"): a key and a request made by openssl with the
// subject the node authorizer expects (CN system:node:<name>, O system:nodes), a
// CertificateSigningRequest for the kubernetes.io/kube-apiserver-client-kubelet signer,
// approved (`kubectl certificate approve`), the certificate read back; and, once per cluster,
// the group system:nodes bound to the built-in ClusterRole system:node (the test control plane
// authorizes with RBAC alone). The kubeconfig carries everything inline and names the API
// server by the guest's fixed address.
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import {
  CertificatesV1Api,
  RbacAuthorizationV1Api,
  type KubeConfig,
} from "@kubernetes/client-node";
import { stringify } from "yaml";
import { API_TLS_SERVER_NAME } from "./machine-identity.js";

const run = promisify(execFile);

/** The kube-controller-manager signs approved requests within a second or two. */
const SIGN_TIMEOUT_MS = 60_000;

export const NODES_GROUP = "system:nodes";
export const nodeUserName = (node: string): string => `system:node:${node}`;

export interface KubeletIdentity {
  certPem: string;
  keyPem: string;
}

/**
 * kube-controller-manager's csrapproving controller approves a kubelet client request by
 * itself when its requester may create certificatesigningrequests/nodeclient, as the admin
 * may; otherwise the person approves it (`kubectl certificate approve`). Approving twice is
 * refused (a duplicate Approved condition), so only an unapproved request is approved here;
 * and the controller may approve it between the read and the write (409 Conflict: the
 * request changed), after which it is read again.
 */
async function approveUnlessApproved(
  certs: CertificatesV1Api,
  name: string,
  node: string,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const csr = await certs.readCertificateSigningRequest({ name });
    if ((csr.status?.conditions ?? []).some((c) => c.type === "Approved")) break;
    csr.status = {
      ...csr.status,
      conditions: [
        ...(csr.status?.conditions ?? []),
        {
          type: "Approved",
          status: "True",
          reason: "LikenMachineScenario",
          message: `the machine scenario approves the kubelet of ${node}`,
        },
      ],
    };
    try {
      await certs.replaceCertificateSigningRequestApproval({ name, body: csr });
      break;
    } catch (e) {
      if ((e as { code?: number }).code !== 409 || attempt >= 5) throw e;
    }
  }
}

/** RBAC for kubelets: the built-in role, bound to their group (kubeadm's binding, by hand). */
export async function bindNodeRole(kc: KubeConfig): Promise<void> {
  await kc.makeApiClient(RbacAuthorizationV1Api).createClusterRoleBinding({
    body: {
      metadata: { name: "liken-machine-scenario:nodes" },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "system:node" },
      subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "Group", name: NODES_GROUP }],
    },
  });
}

export async function issueKubeletCert(
  kc: KubeConfig,
  dir: string,
  node: string,
): Promise<KubeletIdentity> {
  const keyFile = path.join(dir, `${node}.kubelet.key`);
  const csrFile = path.join(dir, `${node}.kubelet.csr`);
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
    `/O=${NODES_GROUP}/CN=${nodeUserName(node)}`,
    "-out",
    csrFile,
  ]);
  const certs = kc.makeApiClient(CertificatesV1Api);
  const name = `liken-kubelet-${node}`;
  await certs.createCertificateSigningRequest({
    body: {
      metadata: { name },
      spec: {
        request: readFileSync(csrFile).toString("base64"),
        signerName: "kubernetes.io/kube-apiserver-client-kubelet",
        // The signer takes exactly these for an EC key (key encipherment is RSA's).
        usages: ["digital signature", "client auth"],
      },
    },
  });
  await approveUnlessApproved(certs, name, node);
  const deadline = Date.now() + SIGN_TIMEOUT_MS;
  for (;;) {
    const cur = await certs.readCertificateSigningRequest({ name });
    if (cur.status?.certificate) {
      return {
        certPem: Buffer.from(cur.status.certificate, "base64").toString(),
        keyPem: readFileSync(keyFile, "utf8"),
      };
    }
    const failed = cur.status?.conditions?.find((c) => c.type === "Failed" || c.type === "Denied");
    if (failed !== undefined || Date.now() > deadline) {
      throw new Error(
        `CertificateSigningRequest ${name} (kube-apiserver-client-kubelet) was approved but not signed${failed ? `: ${failed.type} ${failed.reason}: ${failed.message}` : ` within ${SIGN_TIMEOUT_MS / 1000} s; is kube-controller-manager running with --cluster-signing-cert-file?`}`,
      );
    }
    await sleep(250);
  }
}

/** The kubelet's kubeconfig: server, CA, certificate and key inline. */
export function kubeletKubeconfig(o: {
  server: string;
  caPem: string;
  identity: KubeletIdentity;
  node: string;
}): string {
  const b64 = (s: string): string => Buffer.from(s).toString("base64");
  const user = nodeUserName(o.node);
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
