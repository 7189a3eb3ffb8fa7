// What the approver reads of a certificate request and of the cluster (decide.ts), and the
// limits it applies: the shapes, the flood bound, the keys it accepts, the machine a request names.
import type { RejoinProof } from "../../api/rejoin-proof.js";
import { AGENT_USER_PREFIX } from "../../api/types.js";

/** The public key of a request, as its SubjectPublicKeyInfo says. */
export type KeyFacts =
  | { kind: "rsa"; bits: number }
  | { kind: "ec"; curve: string }
  | { kind: "ed25519" }
  | { kind: "other"; name: string };

/** What the PKCS#10 request itself asks for (./request.ts reads it). */
export interface RequestFacts {
  commonName: string | undefined;
  organizations: readonly string[];
  /** Subject attributes other than CN and O (OU, C, ...), by their short names. */
  otherSubject: readonly string[];
  /** Subject alternative names asked for: a client identity has none. */
  alternativeNames: number;
  key: KeyFacts;
}

export type CsrState = "Pending" | "Approved" | "Denied" | "Failed";

/** One CertificateSigningRequest as the approver sees it. */
export interface CsrView {
  name: string;
  createdMs: number;
  signerName: string;
  usages: readonly string[];
  username: string;
  groups: readonly string[];
  state: CsrState;
  /** The issued certificate's notAfter, once the signer issued one. */
  issuedNotAfterMs?: number;
  request: RequestFacts | { unreadable: string };
  /**
   * The proof of a machine joining again while its certificate is valid but no longer
   * accepted (src/api/rejoin-proof.ts), its signature already checked; absent when it has none.
   */
  rejoin?: RejoinProof | { invalid: string };
}

/** What the cluster holds for the requested machine name (looked up by the wiring). */
export interface Target {
  node: boolean;
  /**
   * That Node carries the label the operator's configuration names (`liken operator
   * --csr-node-label`); false when it names none or there is no such Node.
   */
  nodeLabelled: boolean;
  /** A Machine of that name exists: created ahead by a person or a provisioner. */
  machine: boolean;
  /** status.certificateExpiry of that Machine, as its agent last reported it. */
  certificateExpiryMs?: number;
  /** status.certificateKeyDigest of that Machine: the key of that certificate ("sha256:<hex>"). */
  certificateKeyDigest?: string;
  /**
   * The value of that Machine's liken.sh/rejoin annotation, set by a person before a CA
   * rotation: no request of the bootstrap credential for it is approved automatically.
   */
  rejoinMarker?: string;
}

export interface CsrWorld {
  nowMs: number;
  target: Target;
  /** Every CertificateSigningRequest the server holds (this one may be among them). */
  all: readonly CsrView[];
  /** Off: nothing is approved automatically; a person approves (liken operator --csr-approval). */
  autoApprove: boolean;
  /** The Node label that marks a machine of the fleet (--csr-node-label), for the messages. */
  nodeLabel?: string;
}

/** Why a request was not approved: each is documented in docs/operator.md. */
export type CsrRefusal =
  | "WrongSigner"
  | "Unreadable"
  | "WrongSubject"
  | "WrongUsages"
  | "WeakKey"
  | "OtherMachine"
  | "UnknownRequester"
  | "NoSuchMachine"
  | "UnexpectedNode"
  | "AlreadyJoined"
  | "RejoinProofInvalid"
  | "RejoinProofStale"
  | "RejoinKeyUnknown"
  | "RejoinLeftForPerson"
  | "RequestFlood"
  | "AlreadyPending"
  | "AutoApprovalOff";

export type CsrDecision =
  | { kind: "ignore" }
  /** `rejoined`: a machine proved itself after a CA rotation (said in a Normal Event). */
  | { kind: "approve"; machine: string; message: string; rejoined?: boolean }
  /** Denied: the Denied condition carries the reason; the signer will never issue it. */
  | { kind: "deny"; reason: CsrRefusal; message: string }
  /** Left pending for a person (`kubectl certificate approve|deny`). */
  | { kind: "leave"; reason: CsrRefusal; message: string };

/**
 * A machine's agent files one request per renewal (at 70-90 % of a lifetime, ./identity in
 * the agent) and waits on it; after a denial it waits REFILE_AFTER (60 s) before the next.
 * So more than this many from one identity for one name within FLOOD_WINDOW_MS is no agent
 * of liken's: the surplus is denied.
 */
export const FLOOD_MAX = 3;
export const FLOOD_WINDOW_MS = 60_000;

/** Keys the Go x509 stack and today's guidance (NIST SP 800-57: RSA ≥ 2048, P-256 up) accept. */
export const MIN_RSA_BITS = 2048;
export const ACCEPTED_CURVES: ReadonlySet<string> = new Set([
  "prime256v1",
  "secp384r1",
  "secp521r1",
]);

/**
 * How far apart the moment a rejoin proof was signed (the machine's clock) and the moment the
 * API server created its request may be. The agent signs right before it files, so the gap is
 * the two clocks' skew: chrony keeps a machine within a second; ten minutes lets a machine
 * whose clock drifted a while rejoin, and still refuses a proof kept from long ago.
 */
export const REJOIN_PROOF_SKEW_MS = 10 * 60_000;

/** A DNS-1123 subdomain: the names a Machine and a Node can have. */
export const NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** The machine name a request asks for, from its CN; undefined when it names none. */
export function requestedMachine(csr: CsrView): string | undefined {
  if ("unreadable" in csr.request) return undefined;
  const cn = csr.request.commonName;
  if (cn === undefined || !cn.startsWith(AGENT_USER_PREFIX)) return undefined;
  const name = cn.slice(AGENT_USER_PREFIX.length);
  return name.length > 0 && name.length <= 253 && NAME.test(name) ? name : undefined;
}
