// Filing this machine's certificate request and waiting for the certificate: the same for the
// first join (authenticated by the bootstrap token) and for a renewal (by the machine's own
// certificate). The key is made here and never leaves the machine: only its public half
// goes out, inside the PKCS#10 request, which ./pkcs10.ts encodes with node:crypto alone: a
// library loaded for it stayed loaded in the idle agent (docs/adr/agent-csr-without-x509.md).
import { createHash, createPublicKey, generateKeyPairSync } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { isAlreadyExists } from "../../api/errors.js";
import type { Rest } from "../../api/rest.js";
import { AGENT_GROUP, agentUserName, MACHINE_CSR_USAGES, MACHINE_SIGNER } from "../../api/types.js";
import { AgentError } from "../errors.js";
import { pkcs10Pem } from "./pkcs10.js";

const CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
/**
 * How often the request is read while it waits: every second at first (cluster-operator looks
 * every 2 s), slowing to every 10 s so a fleet that nobody approves does not poll hard.
 */
const POLL_FIRST_MS = 1_000;
const POLL_MAX_MS = 10_000;

interface Csr {
  metadata: { name: string };
  status?: {
    certificate?: string;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
}

/** A fresh ECDSA P-256 key (what the kubelet makes), as PKCS#8 PEM. */
export function newKey(): string {
  const { privateKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  return privateKey.export({ type: "pkcs8", format: "pem" }).toString();
}

/**
 * The request's name: the machine and a digest of the public key. The same key makes the
 * same name, so an agent restarted while it waits finds its own request again instead of
 * filing a second one (which the approver would leave as AlreadyPending).
 */
export function requestName(machine: string, keyPem: string): string {
  const spki = createPublicKey(keyPem).export({ type: "spki", format: "der" });
  const digest = createHash("sha256").update(spki).digest("hex").slice(0, 16);
  return `liken-${machine.slice(0, 200).replace(/[.-]+$/, "")}-${digest}`;
}

/** The PKCS#10 request for CN=liken:machine:<machine>, O=liken:machines, base64 of its PEM. */
export async function buildRequest(machine: string, keyPem: string): Promise<string> {
  const pem = pkcs10Pem({ commonName: agentUserName(machine), organization: AGENT_GROUP }, keyPem);
  return Buffer.from(pem).toString("base64");
}

export interface RequestOptions {
  machine: string;
  keyPem: string;
  expirationSeconds: number;
  /** After this long without a certificate, say so (and keep waiting). */
  warnAfterMs: number;
  log: Logger;
  signal: AbortSignal;
  /** Told once when the wait passes warnAfterMs (the Machine, when the agent can write it). */
  onSlow?: (message: string) => void;
  /** Annotations of the request: a rejoin's proof (src/api/rejoin-proof.ts). */
  annotations?: Record<string, string>;
}

/** Files (or finds again) the request and returns the issued certificate's PEM. */
export async function requestCertificate(rest: Rest, o: RequestOptions): Promise<string> {
  const name = requestName(o.machine, o.keyPem);
  const op = { verb: "create", kind: "CertificateSigningRequest", name };
  const body = {
    apiVersion: "certificates.k8s.io/v1",
    kind: "CertificateSigningRequest",
    // JSON leaves out annotations when there are none.
    metadata: { name, annotations: o.annotations },
    spec: {
      request: await buildRequest(o.machine, o.keyPem),
      signerName: MACHINE_SIGNER,
      usages: MACHINE_CSR_USAGES,
      expirationSeconds: o.expirationSeconds,
    },
  };
  try {
    await rest.request<Csr>("POST", CSR_PATH, { body, op });
    o.log.info({ csr: name }, "certificate requested; waiting for its approval");
  } catch (e) {
    if (!isAlreadyExists(e)) throw e;
    o.log.info({ csr: name }, "certificate request found again; waiting for its approval");
  }
  const began = Date.now();
  let warned = false;
  let pause = POLL_FIRST_MS;
  for (;;) {
    const csr = await rest.request<Csr>("GET", `${CSR_PATH}/${name}`, {
      op: { verb: "get", kind: "CertificateSigningRequest", name },
    });
    const refused = csr.status?.conditions?.find(
      (c) => (c.type === "Denied" || c.type === "Failed") && c.status === "True",
    );
    if (refused !== undefined) {
      throw new AgentError(
        "LIKEN_AGENT_IDENTITY_REFUSED",
        `certificate request ${name} for machine ${o.machine} was ${refused.type.toLowerCase()} (${refused.reason ?? "no reason"}: ${refused.message ?? ""}); the agent files a new one later (docs/machine.md, "Identity")`,
        { context: { csr: name, reason: refused.reason } },
      );
    }
    const cert = csr.status?.certificate;
    if (cert !== undefined && cert !== "") return Buffer.from(cert, "base64").toString("utf8");
    if (!warned && Date.now() - began >= o.warnAfterMs) {
      warned = true;
      const message = `certificate request ${name} for machine ${o.machine} has not been approved for ${Math.round((Date.now() - began) / 1000)} s: is cluster-operator running with --csr-approval auto, and was a Machine named ${o.machine} created ahead, or does its Node carry the label cluster-operator names (--csr-node-label)? Its Events say why it was left (kubectl describe csr ${name}); a person may approve it: kubectl certificate approve ${name}`;
      o.log.warn({ csr: name }, message);
      o.onSlow?.(message);
    }
    await sleep(pause, undefined, { signal: o.signal });
    pause = Math.min(POLL_MAX_MS, pause * 2);
  }
}
